"""Kernel IR: immutable nodes (`nodes`), a stable printer (`printer`) and a verifier (`verify`)."""
