"""verl-bootstrap: build a verified, reproducible verl environment with one command."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
