import jax
import jax.numpy as jnp


def affine(w, x):
    return w @ x + 1.0


w = jnp.ones((4, 3))
batch = jnp.arange(15.0).reshape(5, 3)

batched = jax.jit(jax.vmap(affine, in_axes=(None, 0)))
print(batched(w, batch).shape)


@jax.jit
def pairwise_sq_dist(a, b):
    return jax.vmap(lambda u: jax.vmap(lambda v: jnp.sum((u - v) ** 2))(b))(a)


print(pairwise_sq_dist(batch, batch[:2]).shape)
