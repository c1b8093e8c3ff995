"""What this machine can run jobs on: its CPU, and each CUDA device (name, `sm_XY`) or ROCm device
(`gfx...`) that PyTorch sees. `detect()` asks a child process (`python -m
compiler.targets.host_devices`), so the caller never imports torch or initialises a GPU driver
itself (a worker forks sandboxes; a CUDA context must not be inherited)."""
from __future__ import annotations

import glob
import json
import os
import platform
import subprocess
import sys
from typing import Any


def _cpu() -> dict[str, Any]:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    isa = [name for name in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "neon") if name in flags]
    return {"model": model, "cores": os.cpu_count() or 1, "isa": isa}


def _gpus() -> list[dict[str, Any]]:
    import torch
    if not torch.cuda.is_available():
        return []
    out = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        if torch.version.hip:
            arch = props.gcnArchName.split(":")[0]
            out.append({"index": index, "name": props.name, "target": f"hip:{arch}", "arch": arch,
                        "memory_bytes": props.total_memory})
        else:
            sm = f"sm_{props.major * 10 + props.minor}"
            out.append({"index": index, "name": props.name, "target": f"cuda:{sm}", "arch": sm,
                        "memory_bytes": props.total_memory})
    return out


def probe() -> dict[str, Any]:
    """This process's view (imports torch)."""
    try:
        gpus = _gpus()
        error = None
    except Exception as e:  # noqa: BLE001 - a broken driver means no GPU, said in the result
        gpus, error = [], f"{type(e).__name__}: {e}"
    return {"cpu": _cpu(), "gpus": gpus, "gpu_error": error}


def has_gpu_nodes() -> bool:
    """An NVIDIA or AMD GPU device node exists (without one, no driver could show PyTorch a GPU)."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


def detect(timeout_s: float = 120) -> dict[str, Any]:
    """The machine's devices, probed in a child process (not started where no GPU device node
    exists: importing torch to be told "none" costs seconds)."""
    if not has_gpu_nodes():
        return {"cpu": _cpu(), "gpus": [], "gpu_error": None}
    done = subprocess.run([sys.executable, "-m", "compiler.targets.host_devices"], capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        return {"cpu": _cpu(), "gpus": [], "gpu_error": done.stderr.strip()[-500:] or f"exit {done.returncode}"}
    return json.loads(done.stdout)


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
