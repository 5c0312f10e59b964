"""Verifying an env: its checks, the bytecode store its imports fill, and `verify --prefix`."""
