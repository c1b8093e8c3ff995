"""Triton: @triton.jit kernels compiled for real or virtual GPU targets (the run they share with
Gluon and Helion: compiler/kernels/program.py)."""
