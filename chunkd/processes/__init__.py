"""The process and its children: standard streams, exit statuses, signals, forked workers."""
