"""An installed env's state and life: its state file and record, the prefix guard, its run log,
the registry of known envs, what is the user's, inspection, changes, resume, re-verification,
re-locking (`update --prefix`) and removal."""
