"""verl's source: its spec, the git checkout or release sdist it is fetched as."""
