"""The env lifecycle: its record, changes to it, resume, inspection, removal, completion."""
