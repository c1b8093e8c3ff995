"""XLA (the compiler in jaxlib): HLO, StableHLO and JAX inputs on virtual CPU devices."""
