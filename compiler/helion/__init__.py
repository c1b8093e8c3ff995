"""Helion: PyTorch's kernel DSL, its generated Triton compiled and linked to the user's lines."""
