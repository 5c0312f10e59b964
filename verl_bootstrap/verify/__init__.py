"""Verifying an env: its checks, the bytecode store its imports fill, one training step, and
verl's own CPU test suite run against it (verltests/)."""
