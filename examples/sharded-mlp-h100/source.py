# A data-parallel training step of a 4-layer MLP on 8 GPUs: the batch is split over "data", the
# weights are replicated, so each weight gradient is all-reduced over the 8 devices. XLA:GPU's
# latency-hiding scheduler turns every all-reduce into an async start/done pair and schedules the
# next gradient GEMM (the layer below's) between them, so the collective overlaps that compute.
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
D, BATCH, LAYERS = 4096, 1024, 4


def loss(params, x, y):
    h = x
    for w in params[:-1]:
        h = jax.nn.gelu(h @ w)
    return jnp.mean((h @ params[-1] - y) ** 2)


def fn(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [w - 0.01 * g for w, g in zip(params, grads)]


def spec(shape, *axes):
    return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, P(*axes)))


example_args = (
    [spec((D, D)) for _ in range(LAYERS)],
    spec((BATCH, D), "data", None),
    spec((BATCH, D), "data", None),
)
