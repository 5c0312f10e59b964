"""Export a lockfile for other tools: conda-lock v1, PEP 751 pylock.toml, hashed requirements.

Kept empty: the CLI reads the format names (`names`) at start-up without the lockfile models.
"""
