"""The plan's data (the step graph and every decision behind it), the host facts it is compiled
from, and the read-only checks of the machine and an env that gate it (doctor/);
`run.compiler.compile` compiles it, since it asks the step kinds to describe their steps."""
