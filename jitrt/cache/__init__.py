"""Offline cache: keys derived mechanically from named parts (`keys.py`), and an on-disk store
of compiled kernels with their metadata (`store.py`)."""
