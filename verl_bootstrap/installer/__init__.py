"""uv and pip, and what they ask of the indexes: their command lines, one stage's resolution,
a lock's artifacts looked up on the indexes and downloaded with their sha256 checked."""
