"""The `helion` language: `@helion.kernel` functions (PyTorch's kernel DSL) and the code that calls
them, run as pasted through the Triton run (compiler/kernels/program.py) with Helion's own records
(compiler/helion/kernels.py)."""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from compiler.errors import ErrorKind
from compiler.kernels.program import PREWARM_MODULES, TritonProgramPipeline
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, Option, UserError, lacks_release
from compiler.targets import TARGETS

EXAMPLE = '''\
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3))
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


@helion.kernel()  # no config: on a GPU Helion autotunes; a virtual target takes its default config
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


x = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
y = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
z = add(matmul(x, y), matmul(x, y))
print(z.shape)
'''



class HelionPipeline(TritonProgramPipeline):
    """The `helion` language: `@helion.kernel` functions (PyTorch's kernel DSL) and the code that
    calls them on CUDA tensors. Helion generates a Triton module per kernel and config; this
    pipeline records each (compiler/helion/kernels.py) and compiles it through Triton like
    any kernel, its lines linked to the user's through Helion's own `# src[file:line]` comments.
    On a virtual target the CUDA device is the one PyTorch's virtual GPU path installs (Helion reads
    its properties and makes tensors on it)."""

    key = "helion"
    title = "Helion"
    accepts = "`@helion.kernel` functions and the Python that calls them on CUDA tensors"
    source_markers = ("@helion.kernel",)
    toolchain_packages = ("helion", "triton", "torch")
    example = EXAMPLE
    prewarm_modules = (*PREWARM_MODULES, "helion", "helion.language", "compiler.helion.kernels")
    check_libraries = ("triton", "helion")  # run_example, Helion's do_bench (compiler/kernels/virtual_checks.py)
    no_kernel = ("the program compiled no Helion kernel: Helion compiles a `@helion.kernel` function when it is "
                 "called, so call it on CUDA tensors (for example under `if __name__ == \"__main__\":`)")
    options = (
        Option("target", "choice", "auto", "CUDA GPU to compile for. auto: this worker's CUDA device if it has one, "
               "else cuda:sm_90. A target this worker does not have is virtual: kernels are compiled, nothing runs, "
               "and Helion's default or first config is used (autotuning times candidates on a GPU).",
               choices=("auto", *(name for name, t in TARGETS.items() if t.is_cuda))),
        Option("configs", "int", 1, "Configs of each kernel to compile: 1, the one chosen; N, that one and N-1 "
               "sampled from Helion's config space for the kernel's inputs (seed 0), each with its own stages, "
               "to diff any two.", minimum=1, maximum=8),
    )

    def toolchain_refusal(self, options: dict[str, Any], versions: dict[str, str]) -> str | None:
        """Helion's virtual CUDA device is PyTorch's virtual GPU shim, pinned to its torch and Triton."""
        from compiler.targets import virtual_gpu
        feature = "the virtual CUDA device Helion compiles on"
        return super().toolchain_refusal(options, versions) or \
            lacks_release(versions, "torch", (virtual_gpu.TORCH_VERSION,), feature) or \
            lacks_release(versions, "triton", (virtual_gpu.TRITON_VERSION,), feature)

    def _enter_language(self, stack: contextlib.ExitStack, execute: bool, path: str) -> None:
        from compiler.helion.kernels import HelionRecorder
        self._helion = HelionRecorder(virtual=not execute, user_file=path)
        stack.enter_context(self._helion.installed())

    def _after_program(self, request: Request, bundle: Bundle) -> None:
        total = int(request.options.get("configs", 1))
        if total > 1:
            bundle.progress(f"compiling {total - 1} sampled configs of each kernel")
            self._helion.compile_samples(total)

    def _error(self, exc: BaseException, path: str, execute: bool, ctx: JobContext) -> UserError:
        """Helion runs the kernel's host code from its generated module: an error raised there (an
        assert on the inputs' shapes) names the user's line that module line came from."""
        import traceback
        error = super()._error(exc, path, execute, ctx)
        modules = self._modules(path)
        inner = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__) if f.filename in modules]
        line = modules[inner[-1][0]][1].get(inner[-1][1] or 0) if inner else None
        if line is None or error.error.kind != ErrorKind.UserCodeError:
            return error
        called = error.error.line
        called = f", in the code Helion generated from it, called at line {called}" if called else ""
        message = re.sub(r"^line \d+: ", "", error.error.message)
        return UserError(error.error.kind, f"line {line}: {message}{called}", line)

    def _modules(self, path: str) -> dict[str, tuple[str, dict[int, int]]]:
        """Helion's generated module file -> (its text, its lines' user lines)."""
        from compiler.helion.kernels import user_lines
        modules = {}
        for compiled in self._helion.compiles:
            with open(compiled.module_file, encoding="utf-8", errors="replace") as f:
                text = f.read()
            modules[compiled.module_file] = (text, user_lines(text, path))
        return modules

    def _kernel_source(self, record: Any, path: str) -> tuple[str, tuple[str, int] | None, Any]:
        module = self._modules(path).get(record.source_file)
        if module is None:
            return super()._kernel_source(record, path)
        lines = module[1]
        return record.source_file, (record.source, record.def_line), lines.get

    def _qualifiers(self) -> list[tuple[Any, str]]:
        """Each Helion compile and the qualifier of its `helion.*:<q>` stages: the kernel's name,
        numbered where the kernel was compiled in several configs."""
        counts: dict[str, int] = {}
        for compiled in self._helion.compiles:
            counts[compiled.kernel] = counts.get(compiled.kernel, 0) + 1
        seen: dict[str, int] = {}
        out = []
        for compiled in self._helion.compiles:
            n = seen.get(compiled.kernel, 0)
            seen[compiled.kernel] = n + 1
            out.append((compiled, f"{compiled.kernel}.{n}" if counts[compiled.kernel] > 1 else compiled.kernel))
        return out

    def _file_names(self, record: Any, path: str) -> list[dict[str, str]]:
        """The Triton module Helion generated is loaded from a file named after the user's file and
        kernel (kernels.HelionRecorder._module_path): the file every location in the kernel's IR
        names. Its stages say which kernel of the user's that module is, and which stage shows it."""
        for compiled, q in self._qualifiers():
            if compiled.module_file == record.source_file:
                return [{"path": compiled.module_file, "file": os.path.basename(compiled.module_file),
                         "name": f"the Triton code Helion generated for your kernel {compiled.kernel}",
                         "about": "the job names the module's file after your file and kernel (Helion "
                                  "names it by its hash), and its lines link to yours through Helion's "
                                  "# src[file:line] comments",
                         "stage": f"helion.triton_code:{q}", "stage_title": f"Triton code {q}"}]
        return super()._file_names(record, path)  # a plain Triton kernel of the program

    def _complete_row(self, record: Any, row: Any) -> None:
        """A kernel Helion generated: its row's config is the Helion config it was compiled with, in
        short (block sizes, warps, ...: `helion.config:<q>` has the whole), before Triton's constexprs."""
        compiled = next((c for c, _ in self._qualifiers() if c.module_file == record.source_file), None)
        if compiled is None:
            return
        row.config = {**short_config(compiled.config), **row.config}
        if not row.config:
            row.why_empty = {**row.why_empty, "config": "Helion compiled the kernel with an empty config"}

    def _write_language_stages(self, bundle: Bundle, path: str) -> None:
        from compiler.helion.kernels import space_table
        modules = self._modules(path)
        if self._helion.failed_samples:
            bundle.add("helion.failed_samples", "Sampled configs not compiled", "Helion", "text",
                       "\n".join(self._helion.failed_samples) + "\n",
                       meta={"count": len(self._helion.failed_samples)})
        for compiled, q in self._qualifiers():
            text, lines = modules[compiled.module_file]
            meta = {"kernel": compiled.kernel, "chosen": compiled.chosen}
            bundle.add(f"helion.config:{q}", f"Config {q}", "Helion", "json",
                       {"kernel": compiled.kernel, "chosen": compiled.chosen, "config": compiled.config,
                        "decorator": compiled.decorator, "search_space": compiled.search_space}, meta=meta)
            bundle.add(f"helion.config_space:{q}", f"Config space {q}", "Helion", "text", space_table(compiled),
                       meta={**meta, "source": "Helion's ConfigSpec.iter_search_dimensions() for these inputs"})
            bundle.add(f"helion.triton_code:{q}", f"Triton code {q}", "Helion", "python", text,
                       source_map=[[line, user] for line, user in sorted(lines.items())],
                       meta={**meta, "note": "the Triton module Helion generated and Triton compiled; its "
                                             "# src[file:line] comments, Helion's own, link it to your lines"})


# the keys of a Helion config a resource row shows (the rest: `helion.config:<q>`), in this order
_SHORT_KEYS = ("block_sizes", "reduction_loops", "num_warps", "num_stages", "pid_type")


def short_config(config: dict[str, Any]) -> dict[str, int | float | str | bool]:
    """A Helion config in short for a resource row: its block sizes, warps, stages and program-id
    layout (`block_sizes="[1, 512]"`: a list as Python writes it), empty lists left out."""
    out: dict[str, int | float | str | bool] = {}
    for key in _SHORT_KEYS:
        value = config.get(key)
        if value is None or value == []:
            continue
        out[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return out
