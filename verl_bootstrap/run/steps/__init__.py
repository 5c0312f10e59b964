"""The kinds of step a plan is made of, and how each one runs."""

from __future__ import annotations
