"""uv and pip, and what they ask of the indexes: their command lines, one stage's resolution,
checked downloads, a wheel's own requirements; and the env backends they install into (envs/)."""
