"""Gluon: Triton's lower-level kernel language, its layouts written out."""
