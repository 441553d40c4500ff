"""Command-line tools: ``fusion-compile`` and ``fusion-opt``."""
