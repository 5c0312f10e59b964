"""One module per command, named by its word (`verl-bootstrap lock` is commands/lock.py; a group's
actions, like `envs list`, in the group's module): its flags (`flags_NAME`, the argparse wiring)
beside its handler (`cmd_NAME`: parse, call the library, print through cli.output, exit code).
cli.registry lists them; only the command being run is imported."""
