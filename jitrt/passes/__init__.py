"""Passes over kernel IR; `pipeline.py` lists them in order."""
