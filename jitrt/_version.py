"""The jitrt version (a part of every offline-cache key)."""
__version__ = "0.1.0"
