from functools import partial

import jax
import jax.numpy as jnp


def init(key, sizes=(4, 8, 1)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (m, n)) * 0.1, jnp.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


@jax.jit
def mse(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


@partial(jax.jit, static_argnums=(3,))
def update(params, x, y, lr):
    grads = jax.grad(mse)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


if __name__ == "__main__":
    params = init(jax.random.PRNGKey(1))
    x = jnp.ones((16, 4))
    y = jnp.zeros((16, 1))
    for step in range(3):
        params = update(params, x, y, 0.1)
    print("loss", mse(params, x, y))
