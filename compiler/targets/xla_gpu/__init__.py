"""Virtual XLA:GPU targets: the GPU compiler in the jax-cuda12 PJRT plugin, run with no GPU.

`jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=TEXT, topology=...)`
gives compile-only devices described by a `GpuTargetConfigProto` in text form; XLA:GPU then compiles
for them exactly as it would for the real device, except for what needs one: autotuning (off, so
GEMM fusions keep XLA's default tile configs) and running anything. Each target's proto text is a
file beside this module (`*.txtpb`), taken from XLA's own specs, its source noted in the file.

Import-light (no jax): the web process reads the choices from here for the option schema.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class XlaGpuTarget:
    """One virtual GPU XLA can compile for: the option value, the proto file and what it describes."""

    name: str  # the option value: "cuda:h100"
    platform: str  # the PJRT plugin's platform: "cuda"
    config_file: str  # GpuTargetConfigProto text, beside this module
    product: str  # device_description_str of the config
    arch: str  # what XLA names the dump files after and targets in PTX: "sm_90a"

    @property
    def config_path(self) -> str:
        return os.path.join(_HERE, self.config_file)

    def config_text(self) -> str:
        with open(self.config_path, encoding="utf-8") as f:
            return f.read()

    @property
    def short_product(self) -> str:
        """ "H100" out of "NVIDIA H100 80GB HBM3"."""
        m = re.search(r"\b([A-Z]\d{2,3}[A-Z]?)\b", self.product)
        return m.group(1) if m else self.product


# The choices of the XLA pipelines' `target` option besides "cpu", in the order the page lists them.
XLA_GPU_TARGETS: dict[str, XlaGpuTarget] = {t.name: t for t in (
    XlaGpuTarget("cuda:a100", "cuda", "a100.txtpb", "NVIDIA A100-SXM4-80GB", "sm_80"),
    XlaGpuTarget("cuda:h100", "cuda", "h100.txtpb", "NVIDIA H100 80GB HBM3", "sm_90a"),
    XlaGpuTarget("cuda:b200", "cuda", "b200.txtpb", "NVIDIA B200", "sm_100a"),
)}

# What a compile for a virtual target does not do that a compile on the real device would.
VIRTUAL_DIFFERENCES = ("compiled by XLA:GPU, not run; autotuning off, default tile configs; no "
                       "timings exist (the schedule's costs are XLA's estimates)")


def get_xla_gpu_target(name: str) -> XlaGpuTarget:
    """The target called `name`; an unknown name is a KeyError listing the known ones."""
    if name not in XLA_GPU_TARGETS:
        raise KeyError(f"unknown XLA GPU target {name!r}; known: {', '.join(XLA_GPU_TARGETS)}")
    return XLA_GPU_TARGETS[name]


def virtual_note(target: XlaGpuTarget) -> str:
    """The page's line on what differs from the real device: "virtual H100: compiled by ..."."""
    return f"virtual {target.short_product}: {VIRTUAL_DIFFERENCES}"


def describe_xla_gpu_target(target: XlaGpuTarget, devices: int, real_device: str | None) -> dict[str, Any]:
    """The `target` timing of an XLA GPU job: where it compiled for, and whether anything ran.
    `real_device` is the worker's own GPU when the job compiled on it (a GPU worker)."""
    info: dict[str, Any] = {"name": target.name, "backend": target.platform, "arch": target.arch,
                            "devices": devices, "config": f"compiler/targets/xla_gpu/{target.config_file}"}
    if real_device:
        note = f"compiled by XLA:GPU on the worker's {real_device} (autotuned on it); not run"
        info.update(virtual=False, executed=False, device=real_device, note=note, summary=note)
    else:
        info.update(virtual=True, executed=False, device=f"virtual {target.product}", note=virtual_note(target),
                    summary=virtual_note(target))  # `summary`: the status line's words
    return info
