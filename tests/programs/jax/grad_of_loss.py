import jax
import jax.numpy as jnp


def predict(w, b, x):
    return jnp.tanh(x @ w + b)


def loss(params, x, y):
    w, b = params
    return jnp.mean((predict(w, b, x) - y) ** 2)


grad_loss = jax.jit(jax.grad(loss))
value_and_grad = jax.jit(jax.value_and_grad(loss))

key = jax.random.PRNGKey(0)
kw, kx = jax.random.split(key)
params = (jax.random.normal(kw, (3, 2)), jnp.zeros(2))
x = jax.random.normal(kx, (8, 3))
y = jnp.ones((8, 2))
g = grad_loss(params, x, y)
v, _ = value_and_grad(params, x, y)
print(v, g[1])
