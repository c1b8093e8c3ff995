"""The NVIDIA tools bundled in the Triton wheel (nvdisasm, cuobjdump), run on a compiled cubin, and
what ptxas -v prints, read."""
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
    """`cuobjdump --dump-resource-usage`: REG, SHARED, LOCAL, STACK, ... of the cubin's (one) kernel."""
    usage: dict[str, int] = {}
    for function_usage in cubin_resource_usage_by_function(cubin, workdir).values():
        usage.update(function_usage)
    return usage


def cubin_resource_usage_by_function(cubin: bytes, workdir: str) -> dict[str, dict[str, int]]:
    """`cuobjdump --dump-resource-usage`, per kernel function of the cubin (in its order)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", dir=workdir, delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        done = subprocess.run([_nvidia_tool("cuobjdump"), "--dump-resource-usage", path], capture_output=True,
                              text=True, timeout=60)
    finally:
        os.remove(path)
    found: dict[str, dict[str, int]] = {}
    function = ""
    for line in done.stdout.splitlines():
        named = re.match(r"\s*Function (\S+?):\s*$", line)
        if named:
            function = named.group(1)
        elif "REG:" in line:
            found[function] = {key: int(value) for key, value in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", line)}
    return found


def parse_ptxas_log(log: str) -> dict[str, int]:
    """Registers, barriers, spills, stack from ptxas -v's `ptxas info` lines (of one kernel)."""
    patterns = {"registers": r"Used (\d+) registers", "barriers": r"used (\d+) barriers",
                "spill_stores_bytes": r"(\d+) bytes spill stores", "spill_loads_bytes": r"(\d+) bytes spill loads",
                "stack_frame_bytes": r"(\d+) bytes stack frame", "shared_bytes_static": r"(\d+) bytes smem"}
    found = {key: re.search(pattern, log) for key, pattern in patterns.items()}
    return {key: int(m.group(1)) for key, m in found.items() if m}


def parse_ptxas_log_by_function(log: str) -> dict[str, dict[str, int]]:
    """ptxas -v's report of several kernels, split at each `Compiling entry function '<name>'`."""
    parts = re.split(r"Compiling entry function '([^']+)'", log)
    return {name: parse_ptxas_log(text) for name, text in zip(parts[1::2], parts[2::2])}
