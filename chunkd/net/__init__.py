"""Calls to the outside and the local HTTP server, bounded; URLs that may hold credentials."""
