"""A `pytorch` job's reproducer: a standalone script that runs the job's `torch.compile` (or export
and AOTInductor) with plain PyTorch, outside irscope, with TORCH_TRACE set, and writes Inductor's
output code per compile id beside the trace (the `inductor.output_code:<id>` stages of the job's page).

Built as text in the web process (compiler/pipeline.py `Pipeline.reproducer`): no torch here.
What irscope itself adds to a compile is said in the script where it adds it.
"""
from __future__ import annotations

from typing import Any

from compiler import reproducers
from compiler.model import Request
from compiler.pytorch.entry_points import is_script

# The same names the job gives the file and the stages (compiler/pytorch/pipeline.py).
USER_FILE = "model.py"

_READ_TRACE = '''

def write_output_code():
    """Inductor's output code of every compile, from the trace (as irscope's stages show it):
    OUT/output_code/NN.py, and index.json mapping irscope's stage key to each file."""
    import json
    trace_dir = os.environ["TORCH_TRACE"]
    codes = []  # (compile id, payload) in trace order
    for name in sorted(os.listdir(trace_dir)) if os.path.isdir(trace_dir) else []:
        with open(os.path.join(trace_dir, name), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\\n")
        i = 0
        while i < len(lines):
            line, i = lines[i], i + 1
            cut = line.find("] {")
            if cut < 0 or line.startswith("\\t"):
                continue
            try:
                entry = json.loads(line[cut + 2:])
            except ValueError:
                continue
            payload = []
            if "has_payload" in entry:
                while i < len(lines) and lines[i].startswith("\\t"):
                    payload.append(lines[i][1:])
                    i += 1
            if "inductor_output_code" in entry:
                frame, compile_ = entry.get("frame_id"), entry.get("frame_compile_id")
                cid = "export" if frame is None or compile_ is None else f"{frame}/{compile_}"
                if entry.get("compiled_autograd_id") is not None:
                    cid = f"!{entry['compiled_autograd_id']}/{cid}"
                if entry.get("attempt"):
                    cid += f"_{entry['attempt']}"
                codes.append((cid, "\\n".join(payload)))
    out = os.path.join(OUT, "output_code")
    os.makedirs(out, exist_ok=True)
    index, seen = {}, {}
    for n, (cid, code) in enumerate(codes):
        i = seen[cid] = seen.get(cid, -1) + 1
        first = code.split("\\n", 1)[0]
        suffix = ".backward" if "backward" in first else ("" if i == 0 else f".{i}")
        name = f"{n:02d}.py"
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(code)
        index[f"inductor.output_code:{cid}{suffix}"] = name
    with open(os.path.join(out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
    print(f"reproducer: {len(codes)} output code file(s) in {out}; the whole trace in {trace_dir} "
          "(tlparse reads it)")
'''

_ENTRY_POINTS = '''

def entry_points(namespace):
    """(model, inputs) as irscope finds them: `model` and `example_inputs` (a tuple, or a function
    returning one), or KernelBench's `Model`, `get_inputs` and `get_init_inputs`."""
    if "model" in namespace or "example_inputs" in namespace or "Model" not in namespace:
        model, inputs = namespace["model"], namespace["example_inputs"]
        inputs = inputs() if callable(inputs) else inputs
    else:
        init = namespace["get_init_inputs"]()
        model = namespace["Model"](**init) if isinstance(init, dict) else namespace["Model"](*init)
        inputs = namespace["get_inputs"]()
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return model, tuple(inputs)
'''


def _config_lines(options: dict[str, Any]) -> list[str]:
    lines = [
        "# irscope turns on Inductor's provenance tracking (it links each kernel to your lines): it adds",
        "# \"# [Provenance debug handles]\" comments to the output code and changes nothing else.",
        "inductor_config.trace.provenance_tracking_level = 1",
        f"inductor_config.cpp_wrapper = {options['cpp_wrapper']!r}",
    ]
    for key, value in options["inductor_config"].items():
        lines.append(f"inductor_config.{key} = {value!r}  # the job's inductor_config")
    return lines


def _gpu_check(target: str) -> str:
    arch = target.split(":sm_", 1)[1]
    major, minor = arch[:-1], arch[-1]
    return f'''
# The job's target is {target}. On irscope's workers without that GPU it compiled for a virtual one
# (Inductor's GPU code, every Triton kernel to PTX and SASS, nothing run); plain PyTorch needs the
# GPU itself to compile for it.
if not torch.cuda.is_available():
    print("reproducer: this job compiled for {target}: run this script on a machine with a CUDA GPU of "
          "compute capability {major}.{minor} (sm_{arch}; e.g. H100 for sm_90). Without one, each Triton kernel "
          "of the job's output code can be compiled alone with Triton's compile-only API: "
          "triton.compile(triton.compiler.ASTSource(fn, signature, constexprs), "
          "target=triton.backends.compiler.GPUTarget('cuda', {arch}, 32)), which needs no GPU.",
          file=sys.stderr)
    sys.exit(2)
if torch.cuda.get_device_capability() != ({major}, {minor}):
    print("reproducer: warning: this GPU is sm_%d%d; the job compiled for sm_{arch}" %
          torch.cuda.get_device_capability(), file=sys.stderr)
'''


def script(pipeline: Any, request: Request, toolchain: dict[str, str], job_id: str = "") -> str | None:
    """The reproducer of a `pytorch` job of `request`, compiled with `toolchain`'s versions; None for
    a program that calls torch.compile itself (it is its own reproducer: `TORCH_TRACE=trace python
    model.py`)."""
    if is_script(request.source):
        return None
    options = request.options  # normalised (Pipeline.reproducer)
    target = options["target"]
    export = options["export"]
    writes = [f"{USER_FILE}           your source, as the job ran it",
              "trace/             PyTorch's structured trace (TORCH_TRACE; tlparse reads it)",
              "output_code/       Inductor's output code per compile (index.json: irscope's stage keys)",
              "inductor-cache/    Inductor's cache (TORCHINDUCTOR_CACHE_DIR): kernels as compiled"]
    if export:
        writes.append("model.pt2          the AOTInductor package")
    needs = ""
    world = options["devices"]
    if world > 1:
        needs = (f"The job ran rank 0 of a virtual world of {world} ranks (PyTorch's fake process-group backend, "
                 "compile-only on fake tensors). This script runs one plain process: start it as rank 0 of a real "
                 f"world instead, e.g. torchrun --nproc-per-node {world} on {world} devices, for the program's "
                 "own init_process_group / init_device_mesh to find one. ")
    if target != "host":
        needs += (f"The job's target is {target}: this script needs a CUDA GPU of that architecture (irscope "
                 "compiled for a virtual one; plain PyTorch cannot). It stops and says so on a machine without "
                 "one.")
    mode = None if options["mode"] == "default" else options["mode"]
    dynamic = None if options["dynamic"] == "auto" else options["dynamic"]
    what = ("It runs your source with plain PyTorch, then " +
            ("torch.export.export and AOTInductor (aoti_compile_and_package)" if export else
             f"torch.compile(model, backend={options['backend']!r}, mode={mode!r}, dynamic={dynamic!r}, "
             f"fullgraph={bool(options['fullgraph'])!r}) and one call"
             + (" and backward (loss = the sum of the outputs that require grad)" if options["training"] else ""))
            + ", as irscope's job did: Inductor writes the output code the job's page shows. Where the job "
              "compiled on fake tensors (its run mode said compile-only), this script builds real ones.")
    parts = [
        reproducers.header(request, toolchain, job_id, "PyTorch (torch.compile)", what, writes, needs),
        reproducers.prologue(toolchain, job_id, ("torch", "triton")),
        "# Set before torch is imported: torch reads them when it is imported.",
        'os.environ["TORCH_TRACE"] = os.path.join(OUT, "trace")',
        'os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(OUT, "inductor-cache")',
        'os.environ["TRITON_CACHE_DIR"] = os.path.join(OUT, "triton-cache")',
        "# One compile process, as in irscope's sandbox (the generated code is the same either way).",
        'os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"',
        "",
        reproducers.write_source(USER_FILE, request.source),
        "import torch  # noqa: E402",
        "import torch._inductor.config as inductor_config  # noqa: E402",
        "",
        *_config_lines(options),
        _ENTRY_POINTS,
        _READ_TRACE,
    ]
    if target != "host":
        parts.append(_gpu_check(target))
    body = ["", "", reproducers.RUN_AS_MODULE,
            "model, inputs = entry_points(namespace)"]
    if target != "host":
        body += ["if isinstance(model, torch.nn.Module):",
                 "    model = model.to(\"cuda\")",
                 "inputs = tuple(t.to(\"cuda\") if isinstance(t, torch.Tensor) else t for t in inputs)"]
    if export:
        body += ["if not isinstance(model, torch.nn.Module):",
                 "    function = model",
                 "",
                 "    class Function(torch.nn.Module):",
                 "        def forward(self, *args):",
                 "            return function(*args)",
                 "    model = Function()",
                 "program = torch.export.export(model, inputs)",
                 "package = torch._inductor.aoti_compile_and_package(program, "
                 "package_path=os.path.join(OUT, \"model.pt2\"))",
                 "outputs = torch._inductor.aoti_load_package(package)(*inputs)"]
    else:
        body += [f"compiled = torch.compile(model, backend={options['backend']!r}, mode={mode!r}, "
                 f"dynamic={dynamic!r}, fullgraph={bool(options['fullgraph'])!r})",
                 "outputs = compiled(*inputs)"]
        if options["training"]:
            body += ["# irscope's training loss: the sum of every output that requires grad",
                     "import torch.utils._pytree as pytree  # noqa: E402",
                     "loss = sum(t.sum() for t in pytree.tree_leaves(outputs)",
                     "           if isinstance(t, torch.Tensor) and t.requires_grad)",
                     "loss.backward()"]
    body += ["write_output_code()", ""]
    return "\n".join(parts + body)
