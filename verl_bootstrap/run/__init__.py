"""Carrying out a plan: runner, state, the prefix guard, the install orchestration."""
