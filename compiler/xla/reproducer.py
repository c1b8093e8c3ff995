"""An `hlo`, `stablehlo` or `jax` job's reproducer: a standalone script that compiles the job's input
with the XLA in plain jax/jaxlib, outside irscope, with XLA's dump flags set (every pass's HLO as
text) and the job's DebugOptions as compile options (data, never flags), and writes XLA's dump, the
StableHLO and the optimized HLO into a folder.

Built as text in the web process (compiler/pipeline.py `Pipeline.reproducer`): no jax here.
"""
from __future__ import annotations

import json
from typing import Any

from compiler import reproducers
from compiler.model import Request
from compiler.user_code import runs_as_written

_INPUT_NAMES = {"hlo": "module.hlo", "stablehlo": "module.mlir", "jax": "user_program.py"}

_LOWER_JAX = reproducers.RUN_AS_MODULE + '''
fn, args = namespace["fn"], namespace["example_args"]
args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
# jax.jit lowers to StableHLO, which XLA compiles as irscope compiles it (below); jax.jit(fn).lower(*args).compile()
# compiles the same module with jax's own options
module = stablehlo = jax.jit(fn).trace(*args).lower({platforms}).as_text(debug_info=True)'''

_COMPILE_MODULE = '''
import re  # noqa: E402

import jax  # noqa: E402
import jax.extend.backend as jax_backend  # noqa: E402
from jaxlib import _jax  # noqa: E402

{lower}
# irscope's compile of a module: the replicas and partitions the module asks for, XLA's options
parts = re.search(r"mhlo\\.num_partitions\\s*=\\s*(\\d+)", stablehlo)
reps = re.search(r"mhlo\\.num_replicas\\s*=\\s*(\\d+)", stablehlo)
replicas = int(reps.group(1)) if reps else 1
partitions = int(parts.group(1)) if parts and {read_partitions} else {devices}
backend = jax_backend.get_backend()
devices = backend.devices()[: replicas * partitions]
options = jax_backend.get_compile_options(replicas, partitions, env_options_overrides=OVERRIDES)
for key, value in PASS_LISTS.items():  # repeated DebugOptions fields: their own setters, as irscope sets them
    setattr(options.executable_build_options.debug_options, key, value)
options.executable_build_options.use_shardy_partitioner = {shardy}
executable = backend.compile_and_load(module, _jax.DeviceList(tuple(devices)), options)
optimized = "\\n".join(m.to_string() for m in executable.hlo_modules())
'''

_LOWER_HLO = '''import jax.extend.mlir as jax_mlir  # noqa: E402
try:  # XLA's HLO bindings: jaxlib._hlo from jaxlib 0.10, jaxlib._jax before
    import jaxlib._hlo as hlo  # noqa: E402
except ModuleNotFoundError:
    from jaxlib import _jax as hlo  # noqa: E402
from jax._src.interpreters import mlir as jmlir  # noqa: E402
from jax._src.lib.mlir import ir  # noqa: E402

# HLO text -> StableHLO, through XLA's own parser and jax's importer (as irscope does)
module = jax_mlir.hlo_to_stablehlo(hlo.hlo_module_from_text(SOURCE).as_serialized_hlo_module_proto())
with jmlir.make_ir_context() as context:
    stablehlo = ir.Module.parse(module, context=context).operation.get_asm(enable_debug_info=True)'''

_LOWER_STABLEHLO = '''module = stablehlo = SOURCE  # compiled as it is'''

_WRITE = '''
for name, text in (("stablehlo.mlir", stablehlo), ("optimized.hlo", optimized)):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(text)
dumped = sorted(os.listdir(DUMP)) if os.path.isdir(DUMP) else []
print(f"reproducer: {len(dumped)} files of XLA's dump in {DUMP}; the StableHLO and the optimized HLO in {OUT}")
'''


def _flag(value: Any) -> str:
    """One of irscope's own dump flags' values (constants, never the job's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def script(pipeline: Any, request: Request, toolchain: dict[str, str], job_id: str = "") -> str | None:
    """The reproducer of an XLA job (`hlo`, `stablehlo`, `jax`) of `request`; None for a JAX program
    that calls jax.jit itself (it is its own reproducer: `JAX_DUMP_IR_TO=dump python file.py`)."""
    options = request.options  # normalised (Pipeline.reproducer)
    language, target = request.language, options["target"]
    if language == "jax" and runs_as_written(request.source, pipeline.convention):
        return None
    devices = options["devices"]
    # The job's xla_options are data: compile options overrides, as the job sets them (compiler/xla/
    # child.py), never spliced into XLA_FLAGS, which holds irscope's own flags only.
    xla_options = dict(options["xla_options"])
    pass_lists = {k: xla_options.pop(k) for k in ("xla_disable_hlo_passes", "xla_enable_hlo_passes_only")
                  if k in xla_options}
    gpu = target != "cpu"
    overrides: dict[str, Any] = {"xla_dump_hlo_pass_re": ".*", "xla_dump_hlo_as_text": True,
                                 "xla_dump_include_timestamp": False}
    if gpu:
        overrides["xla_dump_latency_hiding_schedule"] = True
        if options["triton_ir"]:
            overrides["xla_dump_emitter_re"] = "triton"
    flags = [f"--xla_force_host_platform_device_count={int(devices)}"] + \
        [f"--{name}={_flag(value)}" for name, value in overrides.items()]
    needs = ""
    if gpu:
        needs = (f"The job compiled for {target} ({devices} GPUs), on a virtual topology: irscope's XLA:GPU "
                 "compiled for XLA's own description of that GPU (GpuTargetConfigProto) with no GPU present. This "
                 f"script compiles with jax's CUDA backend: it needs {devices} such GPUs and jax[cuda12] (or, "
                 "without them, jax.experimental.topologies.get_topology_desc(platform='cuda', "
                 "target_config=<that GPU's GpuTargetConfigProto>) for compile-only devices). It stops and says "
                 "so on a machine without them.")
    compiled = "program (jax.jit(fn).lower(*example_args).compile())" if language == "jax" else "module"
    plain = "jax" if language == "jax" else "jax/jaxlib (its XLA, as irscope does)"
    what = (f"It compiles your {compiled} with plain {plain} for "
            f"{'the GPU' if gpu else f'{devices} virtual CPU devices'}, with XLA's dump flags in XLA_FLAGS: every "
            "pass's HLO as text; the job's xla_options as compile options, as the job set them.")
    writes = [f"{_INPUT_NAMES[language]:<18} your input, as the job compiled it",
              "dump/              XLA's dump (xla_dump_to): every pass's HLO, buffer assignment, ...",
              "stablehlo.mlir     the StableHLO XLA compiled",
              "optimized.hlo      the optimized HLO module(s)"]
    parts = [
        reproducers.header(request, toolchain, job_id, pipeline.title, what, writes, needs),
        reproducers.prologue(toolchain, job_id, ("jax", "jaxlib") + (("jax-cuda12-plugin",) if gpu else ())),
        "import json  # noqa: E402",
        'DUMP = os.path.join(OUT, "dump")',
        "# Set before jax is imported: XLA reads them when its client starts.",
        f"XLA_FLAGS = {' '.join(flags)!r}",
        'os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_dump_to=" + DUMP,',
        '                                    XLA_FLAGS]).strip()',
        f'os.environ["JAX_PLATFORMS"] = {"cuda" if gpu else "cpu"!r}',
        "# irscope's dump options, then the job's xla_options (DebugOptions fields), read from JSON",
        f"OVERRIDES = dict(json.loads({reproducers.python_literal(json.dumps(overrides))}), xla_dump_to=DUMP)",
        f"OVERRIDES.update(json.loads({reproducers.python_literal(json.dumps(xla_options))}))",
        f"PASS_LISTS = json.loads({reproducers.python_literal(json.dumps(pass_lists))})",
        "",
        reproducers.write_source(_INPUT_NAMES[language], request.source),
    ]
    if gpu:
        parts.append(f'''try:
    import jax
    jax.devices("cuda")
except Exception:  # noqa: BLE001 - no CUDA backend or no GPU
    print("reproducer: no CUDA GPU for jax here. " + {needs!r}, file=sys.stderr)
    sys.exit(2)
''')
    if language == "jax":
        lower = _LOWER_JAX.format(platforms="lowering_platforms=('cuda',)" if gpu else "")
        shardy, default_partitions = "jax.config.jax_use_shardy_partitioner", 1
    else:
        lower = _LOWER_HLO if language == "hlo" else _LOWER_STABLEHLO
        shardy = '"sdy." in stablehlo' if language == "stablehlo" else "False"
        default_partitions = devices
    parts.append(_COMPILE_MODULE.format(lower=lower, read_partitions="False" if language == "hlo" else "True",
                                        devices=default_partitions, shardy=shardy))
    parts.append(_WRITE)
    return "\n".join(parts)
