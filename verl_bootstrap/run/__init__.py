"""Carrying out a plan: the step kinds (steps/), the pure compiler that asks them to describe
their steps (compiler/), the runner and the install orchestration, the repair check, and an
installed env's state and life (state/)."""
