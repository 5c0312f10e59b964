"""verl's source: its spec, the git checkout or release sdist it is fetched as, and which files in
it are the user's work (never moved or replaced)."""
