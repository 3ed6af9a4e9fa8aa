"""coding-os: the session layer for coding agents."""

__version__ = "0.1.0"
