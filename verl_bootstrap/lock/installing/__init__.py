"""`--locked` / `--frozen`: install exactly a lockfile, as one path beside the resolving install.

prepare: the lockfile checked against the profile and the host, its artifacts looked up and
hash-checked before anything runs, and its stages and verl source attached to the plan;
install: what a locked step writes and checks (hashed requirements, build constraints, the verl
sdist, the env's record); kernels and kernelrun: a kernel stage's locked wheel, planned and taken.
"""
