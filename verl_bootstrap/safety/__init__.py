"""Untrusted input made safe: the bounded YAML reader, the shapes values must have before they
become paths, credentials moved out of command lines, and quoting for generated shell."""
