"""The NVIDIA tools bundled in the Triton wheel (nvdisasm, cuobjdump), run on a compiled cubin."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile


def _nvidia_tool(name: str) -> str:
    from triton import knobs
    return getattr(knobs.nvidia, name).path


def disassemble_sass(cubin: bytes, workdir: str) -> str:
    """nvdisasm's listing of a cubin, with its line info (`//## File ..., line N`)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=workdir, delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        done = subprocess.run([_nvidia_tool("nvdisasm"), "--print-line-info", "--print-code", path],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            # nvdisasm does not know every arch its ptxas can target; cuobjdump is the fallback
            done = subprocess.run([_nvidia_tool("cuobjdump"), "-sass", path], capture_output=True, text=True,
                                  timeout=120)
        return done.stdout if done.returncode == 0 else f"// disassembly failed:\n{done.stderr}"
    finally:
        os.remove(path)


def cubin_resource_usage(cubin: bytes, workdir: str) -> dict[str, int]:
    """`cuobjdump --dump-resource-usage`: REG, SHARED, LOCAL, STACK, ... of the kernel function."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=workdir, delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        done = subprocess.run([_nvidia_tool("cuobjdump"), "--dump-resource-usage", path], capture_output=True,
                              text=True, timeout=60)
    finally:
        os.remove(path)
    usage: dict[str, int] = {}
    for line in done.stdout.splitlines():
        if "REG:" in line:
            for key, value in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", line):
                usage[key] = int(value)
    return usage
