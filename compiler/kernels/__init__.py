"""The GPU-kernel layer every language that compiles GPU kernels shares (Triton, Gluon, Helion,
CuTe, PyTorch's GPU path, XLA:GPU, imports): Triton's compiles captured, a kernel's stages, PTX and SASS
lines, launches, the parallel compile, resources, NVIDIA's tools and MLIR's pass dumps. No pipeline owns it."""
