"""What the tool learns about the machine: variants, interpreters, indexes, filesystems."""
