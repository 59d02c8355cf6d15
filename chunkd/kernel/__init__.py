"""The splitting kernel: the compiled modules, their pure-Python twin (``twin``), and ``chosen``, which picks one of them once for every other module."""
