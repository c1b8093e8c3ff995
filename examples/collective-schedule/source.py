import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

# A 4-layer MLP over 8 devices: x is split by columns and each weight by rows, so every matmul
# contracts a split dimension. Each device computes a partial product; an all-reduce sums them.
mesh = jax.make_mesh((8,), ("model",), axis_types=(jax.sharding.AxisType.Auto,))


def fn(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x.sum(axis=-1)


def spec(shape, *axes):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*axes)))


example_args = (
    spec((32, 256), None, "model"),
    [spec((256, 256), "model", None) for _ in range(4)],
)
