"""Carrying out a plan: compiling it with the step kinds, the runner, the install orchestration."""
