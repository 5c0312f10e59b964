"""What the tool learns about the machine: facts, variants, interpreters, indexes, filesystems."""
