"""The env lifecycle: its state and record, the prefix guard, changes to it, resume, inspection,
removal, completion."""
