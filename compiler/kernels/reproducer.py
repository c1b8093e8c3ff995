"""A `triton`, `gluon` or `helion` job's reproducer: a standalone script that runs the job's program
with plain Triton (and torch, and Helion) on the machine's GPU, outside irscope, with Triton's
cache, kernel dump and per-pass dumps in a folder: every compiled kernel's TTIR, TTGIR, LLVM IR, PTX
and cubin, as the job's stages show them.

Built as text in the web process (compiler/pipeline.py `Pipeline.reproducer`): no triton here.
"""
from __future__ import annotations

from typing import Any

from compiler import reproducers
from compiler.model import Request

SOURCE_NAME = "kernels.py"  # the job's own name for the file (compiler/triton/pipeline.py)

_LIST_KERNELS = '''

def list_kernels():
    """Each compiled kernel's files, from Triton's cache (one directory per compilation)."""
    cache = os.environ["TRITON_CACHE_DIR"]
    found = []
    for folder, _dirs, files in os.walk(cache):
        names = sorted(f for f in files if f.endswith((".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".amdgcn")))
        if names:
            found.append((os.path.relpath(folder, OUT), names))
    for folder, names in sorted(found):
        print(f"reproducer: {folder}: {', '.join(names)}")
    print(f"reproducer: {len(found)} compiled kernel(s) in {cache}; Triton's kernel dump in "
          f"{os.environ['TRITON_DUMP_DIR']}; every pass's IR in {os.path.join(OUT, 'passes.log')}")
'''


def script(pipeline: Any, request: Request, toolchain: dict[str, str], job_id: str = "") -> str:
    """The reproducer of a `triton` / `gluon` / `helion` job of `request`."""
    options = request.options  # normalised (Pipeline.reproducer)
    target = options["target"]
    language = request.language
    packages = ("triton", "torch") + (("helion",) if language == "helion" else ())
    arch = target.split(":sm_", 1)[1] if ":sm_" in target else ""
    if arch:
        needs = (f"The job compiled for {target}, on a virtual GPU where the worker had none. Plain Triton compiles "
                 f"for the GPU it runs on: this script needs a CUDA GPU of compute capability "
                 f"{arch[:-1]}.{arch[-1]} (sm_{arch}) and stops and says so elsewhere. Without one, each "
                 f"@triton.jit kernel can be compiled alone with Triton's compile-only API: "
                 f"triton.compile(triton.compiler.ASTSource(fn, signature, constexprs), "
                 f"target=triton.backends.compiler.GPUTarget('cuda', {arch}, 32)).")
    elif target.startswith("hip:"):
        needs = f"The job compiled for {target}: this script needs that AMD GPU and a ROCm build of Triton."
    else:
        needs = "It needs a CUDA GPU (the job's target was auto: the worker's GPU, or a virtual sm_90)."
    if language == "helion":
        needs += (" Helion autotunes a kernel that fixes no config on a real GPU; on a virtual one irscope compiled "
                  "its default config (and the job's `configs` sampled ones), so the configs may differ.")
    what = (f"It runs your program with plain {'Helion and ' if language == 'helion' else ''}Triton on this "
            "machine's GPU, as irscope's job did, with Triton's cache (TRITON_CACHE_DIR), kernel dump "
            "(TRITON_KERNEL_DUMP, TRITON_DUMP_DIR) and per-pass IR dumps (MLIR_ENABLE_DUMP) in OUT_DIR.")
    writes = [f"{SOURCE_NAME}         your program, as the job ran it",
              "triton-cache/      every compiled kernel: .ttir .ttgir .llir .ptx .cubin and its metadata",
              "triton-dump/       Triton's kernel dump (TRITON_KERNEL_DUMP)",
              "passes.log         the IR before every pass (MLIR_ENABLE_DUMP; Triton prints it to stderr)"]
    gpu_check = f'''
if not torch.cuda.is_available():
    print("reproducer: no GPU here. " + {needs!r}, file=sys.stderr)
    sys.exit(2)
'''
    if arch:
        gpu_check += f'''if torch.cuda.get_device_capability() != ({arch[:-1]}, {arch[-1]}):
    print("reproducer: warning: this GPU is sm_%d%d; the job compiled for sm_{arch}" %
          torch.cuda.get_device_capability(), file=sys.stderr)
'''
    parts = [
        reproducers.header(request, toolchain, job_id, pipeline.title, what, writes, needs),
        reproducers.prologue(toolchain, job_id, packages),
        "# Set before triton is imported: it reads them when a kernel compiles.",
        'os.environ["TRITON_CACHE_DIR"] = os.path.join(OUT, "triton-cache")',
        'os.environ["TRITON_DUMP_DIR"] = os.path.join(OUT, "triton-dump")',
        'os.environ["TRITON_KERNEL_DUMP"] = "1"',
        'os.environ["MLIR_ENABLE_DUMP"] = "1"',
        "# Triton's current default (FMA fusion on), set explicitly as irscope's job did",
        'os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"',
        'os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(OUT, "inductor-cache")',
        "",
        reproducers.write_source(SOURCE_NAME, request.source),
        "import runpy  # noqa: E402",
        "",
        "import torch  # noqa: E402",
        _LIST_KERNELS,
        gpu_check,
        "",
        "# Triton prints each pass's IR to stderr (MLIR_ENABLE_DUMP): kept in OUT_DIR/passes.log",
        "sys.stderr.flush()",
        "_passes = open(os.path.join(OUT, \"passes.log\"), \"w\")",
        "_stderr = os.dup(2)",
        "os.dup2(_passes.fileno(), 2)",
        "try:",
        "    # as irscope runs it: as `python kernels.py` runs it (its main() guard taken)",
        "    sys.argv = [SOURCE_PATH]",
        "    runpy.run_path(SOURCE_PATH, run_name=\"__main__\")",
        "    torch.cuda.synchronize()",
        "finally:",
        "    sys.stderr.flush()",
        "    os.dup2(_stderr, 2)",
        "list_kernels()",
        "",
    ]
    return "\n".join(parts)
