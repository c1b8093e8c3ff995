import jax
import jax.numpy as jnp


def axpy(a, x, y):
    return a * x + y


lowered = jax.jit(axpy).lower(2.0, jnp.ones(8), jnp.ones(8))
print(lowered.as_text()[:200])
compiled = lowered.compile()
print(compiled(2.0, jnp.ones(8), jnp.ones(8)))


def row_softmax(x):
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


spec = jax.ShapeDtypeStruct((4, 6), jnp.float32)
exe = jax.jit(row_softmax).lower(spec).compile()
print(exe(jnp.zeros((4, 6))))
