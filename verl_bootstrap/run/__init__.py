"""Carrying out a plan: the runner, the install orchestration, the repair check."""
