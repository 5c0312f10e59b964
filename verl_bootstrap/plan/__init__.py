"""The plan's data (the step graph and every decision behind it) and the host facts it is compiled
from; `compiler.compile` compiles it, since it asks the step kinds to describe their steps."""
