"""A world of N ranks for the pasted source: rank 0 of it, on PyTorch's fake process group.

With the pytorch option `devices: N` (N > 1) irscope does what `torchrun --nproc-per-node N` does
for rank 0 before the source runs: RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE in the
environment and the default process group initialised, here with PyTorch's own fake backend
(`torch.testing._internal.distributed.fake_pg`), which answers every collective at once and moves
no data. `init_device_mesh`, DTensor, `parallelize_module`, `fully_shard`, the functional
collectives and `dist.*` then run as pasted, and `torch.compile` traces and compiles rank 0's
program, collectives included, as it would on a cluster: rank 0 alone is compiled, so the compile
does not grow with the world.

The source runs under the compile-only fake mode (compiler/kernels/compile_only.py): a mesh's rank
layout is the one tensor that must hold values (DeviceMesh reads it), so `init_device_mesh` builds it
outside the fake mode. A source that initialises the process group itself is answered by irscope's
world when it asks for the same size, and gets a sentence naming its line otherwise.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterator
from unittest import mock

from compiler.errors import ErrorKind
from compiler.pipeline import UserError
from compiler.pytorch.collectives import dtype_name
from compiler.user_code import line_on_stack

MAX_DEVICES = 1024  # world sizes of real jobs; rank 0 alone is compiled, so the cost is the meshes' groups

NOT_TIMED = ("rank 0 of a virtual world of {n} ranks: the fake process group moves no data and waits for no "
             "peer, so there is nothing true to time")

NOTE = ("A virtual world: the source ran as rank 0 of {n} ranks on PyTorch's fake process group (torchrun's "
        "environment variables set, the default group initialised by irscope), the way torchrun would start it; "
        "Dynamo, AOTAutograd and Inductor compiled rank 0's program with its collectives exactly as for a real "
        "group of that size. The fake group moves no data: values after a collective are not what a cluster "
        "computes, so nothing is timed.")


@dataclass
class World:
    """The world irscope initialised: its size and the meshes the source made."""

    size: int
    meshes: list[Any] = field(default_factory=list)  # torch DeviceMesh objects, in creation order


def start(size: int, torch: Any) -> World:
    """Initialise the default process group as rank 0 of `size` ranks (the fake backend), with
    torchrun's environment, before the source runs."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(size), "LOCAL_WORLD_SIZE": str(size),
                       "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=size)
    _mesh_layout_outside_fake_mode()
    return World(size)


# DeviceMesh's methods that compute on its rank layout (a real tensor of ranks): slicing a mesh by
# name, flattening, coordinates. The source and the compile run under the fake mode, where that
# tensor would become a fake one with no values (mesh["tp"] then fails in aten.nonzero).
_LAYOUT_METHODS = ("__getitem__", "_flatten", "_unflatten", "_concatenate", "get_coordinate", "get_local_rank",
                   "_get_all_submeshes")


def _mesh_layout_outside_fake_mode() -> None:
    """For this process (a job process serves one job): DeviceMesh's layout methods run outside
    any fake mode, as DeviceMesh itself runs them on a real cluster."""
    import functools

    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.device_mesh import DeviceMesh

    def outside(method: Any) -> Any:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with unset_fake_temporarily():
                return method(*args, **kwargs)
        return call

    for name in _LAYOUT_METHODS:
        method = DeviceMesh.__dict__.get(name)
        if callable(method):
            setattr(DeviceMesh, name, outside(method))


@contextlib.contextmanager
def source_patches(world: World, path: str) -> Iterator[None]:
    """While the source runs: meshes built outside the fake mode and recorded; the source's own
    init_process_group answered by the world already there (or refused with its line); a model
    moved with `.cuda()` / `.to()` / `.half()` on the fake tensors it is made of."""
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh
    import torch.distributed.distributed_c10d as c10d
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    original_mesh = device_mesh.init_device_mesh

    def init_device_mesh(device_type: str, mesh_shape: Any, *args: Any, **kwargs: Any) -> Any:
        shape = (mesh_shape,) if isinstance(mesh_shape, int) else tuple(mesh_shape)
        needed = 1
        for n in shape:
            needed *= int(n)
        if needed != world.size:
            raise UserError(ErrorKind.InputError, *_at(path, f"init_device_mesh({device_type!r}, {shape}) asks for a "
                                                            f"mesh of {needed} devices, and this job's world has "
                                                            f"{world.size} (option devices: {world.size}); set "
                                                            f"devices: {needed}, or a mesh whose sizes multiply "
                                                            f"to {world.size}"))
        with unset_fake_temporarily():
            mesh = original_mesh(device_type, mesh_shape, *args, **kwargs)
        world.meshes.append(mesh)
        return mesh

    def init_process_group(*args: Any, **kwargs: Any) -> None:
        # already initialised, by irscope, as rank 0: answered unless it asks for another size
        asked = kwargs.get("world_size", args[4] if len(args) > 4 else -1)
        if asked not in (-1, None) and int(asked) != world.size:
            raise UserError(ErrorKind.InputError, *_at(path, f"init_process_group(world_size={asked}) asks for a "
                                                            f"world of {asked} ranks; irscope already initialised "
                                                            f"one of {world.size} (option devices: {world.size}): "
                                                            f"set devices: {asked}"))

    patched = [(device_mesh, "init_device_mesh", init_device_mesh), (c10d, "init_process_group", init_process_group),
               (dist, "init_process_group", init_process_group),
               # the program's last line on a cluster; the world's stages are written after it
               (dist, "destroy_process_group", lambda group=None: None)]
    import torch
    if torch.version.cuda:  # a CUDA device (the virtual GPU's): one node of the world's size, as torchrun sees it
        patched += [(owner, "device_count", lambda: world.size) for owner in (torch.cuda, torch.accelerator)
                    if hasattr(owner, "device_count")]
    import importlib
    import sys
    for name in ("torch.distributed.tensor", "torch.distributed._tensor",  # the public and older paths, and
                 "torch.distributed._tensor.device_mesh", "torch.distributed.fsdp"):  # fully_shard's default mesh
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # every module of torch.distributed that imported the function by name (fully_shard makes its
    # default mesh with its own reference)
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("torch.distributed") and m is not None]:
        if module is not device_mesh and getattr(module, "init_device_mesh", None) is original_mesh:
            patched.append((module, "init_device_mesh", init_device_mesh))
    from compiler.kernels.fake_modules import convertible
    with contextlib.ExitStack() as stack:
        for module, name, value in patched:
            stack.enter_context(mock.patch.object(module, name, value))
        stack.enter_context(convertible())
        yield


def _at(path: str, message: str) -> tuple[str, int | None]:
    """A UserError's message and line: the user's innermost line on the stack."""
    line = line_on_stack(path)
    return (f"line {line}: {message}" if line else message), line


def explain(text: str, devices: int) -> str | None:
    """A sentence to add to the user's error when it comes from a world of the wrong kind."""
    if devices == 1 and ("Default process group has not been initialized" in text
                         or "init_process_group" in text or "environment variable RANK" in text
                         or "MASTER_ADDR" in text):
        return ("this job has no process group: set the option devices (e.g. devices: 8) and irscope runs the "
                "source as rank 0 of that many ranks, with the process group initialised as torchrun would")
    if "mesh_dim_names" in text or ("Mesh dimension" in text and "not" in text):
        return "a DeviceMesh is indexed by the names given as init_device_mesh's mesh_dim_names"
    return None


def explained(error: UserError, devices: int) -> UserError:
    """`error`, with the sentence `explain` finds for it appended."""
    sentence = explain(error.error.message, devices)
    if sentence is None:
        return error
    out = UserError(error.error.kind, f"{error.error.message} ({sentence})", error.error.line)
    out.output = error.output
    return out


# --- placements: each parameter and buffer on its mesh ------------------------------------------------

MAX_RANKS_DRAWN = 256  # past that, a parameter's tiles are not listed (the viewer draws at most 256)


def placements(model: Any, world: World, torch: Any) -> dict[str, Any] | None:
    """The `mesh` stage value (compiler/formats.Mesh) for every DTensor parameter and buffer of
    `model`: its placements per mesh dimension, global and local shapes, and the block of the global
    tensor each rank holds, as DTensor itself computes it for that rank's coordinate. None when the
    model holds no DTensor."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

    if not isinstance(model, torch.nn.Module):
        return None
    arrays = []
    for role, items in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in items:
            if not isinstance(tensor, DTensor):
                continue
            mesh, spec = tensor.device_mesh, tensor.placements
            shape = tuple(int(n) for n in tensor.shape)
            ranks = [int(r) for r in mesh.mesh.flatten().tolist()]
            coordinates = _coordinates(tuple(mesh.shape))
            blocks: dict[tuple, list[int]] = {}
            if len(ranks) <= MAX_RANKS_DRAWN:
                for rank, coordinate in zip(ranks, coordinates):
                    local, offset = _compute_local_shape_and_global_offset(shape, tuple(mesh.shape), list(coordinate),
                                                                           spec)
                    blocks.setdefault(tuple((o, o + n) for o, n in zip(offset, local)), []).append(rank)
            tiles = [{"index": list(_tile_index(block, shape, blocks)), "ranges": [list(r) for r in block],
                      "devices": devices} for block, devices in blocks.items()]
            local_shape = tuple(int(n) for n in tensor.to_local().shape)
            names = mesh.mesh_dim_names or tuple(f"dim {i}" for i in range(mesh.ndim))
            described = ", ".join(f"{dim}={n}: {_placement(p)}" for dim, n, p in zip(names, mesh.shape, spec))
            kinds = {type(p).__name__ for p in spec}
            kind = "partial" if "Partial" in kinds else ("replicated" if kinds == {"Replicate"} else "tiled")
            arrays.append({"role": f"{role} ({dtype_name(tensor.dtype)}; rank 0 holds {list(local_shape)})",
                           "name": name, "shape": f"{dtype_name(tensor.dtype)}{list(shape)}", "dims": list(shape),
                           "sharding": described, "type": kind, "tiles": tiles,
                           "tile_dims": [int(n) for n in mesh.shape], "tile_devices": ranks})
    if not arrays:
        return None
    return {"devices": world.size, "partitioner": "PyTorch DTensor", "arrays": arrays, "instructions": [],
            "collectives": [], "from_stage": "the model's parameters and buffers after the source ran"}


def _coordinates(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for n in shape:
        out = [c + (i,) for c in out for i in range(n)]
    return out


def _tile_index(block: tuple, shape: tuple, blocks: dict) -> tuple[int, ...]:
    """A block's position among the blocks, per dimension (its rank among the distinct starts)."""
    return tuple(sorted({b[d][0] for b in blocks}).index(block[d][0]) for d in range(len(shape)))


def _placement(p: Any) -> str:
    return repr(p).replace("dim=", "")


