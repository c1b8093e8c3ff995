"""Parsers of what the compilers write (traces, pass dumps, dump directories): pure text -> records."""
