"""Offline bundles: one archive that installs a lockfile's env on a node with no network."""
