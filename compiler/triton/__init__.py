"""Triton: @triton.jit kernels compiled for real or virtual GPU targets; its kernel capture is a
library the PyTorch GPU path uses too."""
