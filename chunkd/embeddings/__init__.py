"""Embedding models: choosing one, calling it, caching its vectors."""
