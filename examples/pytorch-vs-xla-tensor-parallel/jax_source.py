import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

# The same MLP on the same 8 devices: up split by columns, down by rows, x replicated.
mesh = jax.make_mesh((8,), ("tp",), axis_types=(jax.sharding.AxisType.Auto,))


def fn(x, up_w, up_b, down_w, down_b):
    h = jax.nn.relu(x @ up_w + up_b)
    return h @ down_w + down_b


def spec(shape, *axes):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*axes)))


example_args = (
    spec((32, 256)),
    spec((256, 1024), None, "tp"),
    spec((1024,), "tp"),
    spec((1024, 256), "tp", None),
    spec((256,)),
)
