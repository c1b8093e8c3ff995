"""One paragraph per stage for learners: what this artifact is and what to look for in it."""
from __future__ import annotations

# Stage-key prefix -> explanation. The longest matching prefix wins.
EXPLANATIONS: dict[str, str] = {
    "source": "The program exactly as submitted. Lines in other stages that came from a source line share its "
              "colour; hover a line here or there to see its partners.",
    "run.stdout": "What the program printed while it was defined and run, in order.",
    "worker.log": "What the sandboxed worker process wrote to stdout and stderr: compiler warnings, log lines "
                  "and, when a job dies, its last words.",
    "dynamo.fx_graph": "TorchDynamo rewrote the Python bytecode of the compiled function (a model's forward, or "
                       "the function torch.compile wrapped) and recorded every tensor "
                       "operation into an FX graph: this is it, as readable Python. Each node is one call; "
                       "what Dynamo could not trace caused a graph break instead of appearing here.",
    "dynamo.bytecode": "The frame's original bytecode and the bytecode Dynamo generated to replace it: the new "
                       "code checks the guards, calls the compiled graph and falls back to Python for the rest.",
    "dynamo.bytecode@original_only": "Only the frame's original bytecode: Dynamo generated no bytecode to replace "
                                     "it, because the compile failed before Dynamo finished the frame.",
    "dynamo.guards": "The conditions under which the compiled code stays valid (shapes, dtypes, globals, module "
                     "attributes). If one fails on a later call, Dynamo recompiles.",
    "dynamo.guards_explained": "The same guards in words, grouped by what they check: the tensors' dtype, device, "
                               "shape, stride and requires_grad; types and object identities; constant values "
                               "Dynamo specialised on; global state; conditions on symbolic sizes. For a "
                               "recompile, the guard of each earlier compile that failed and the input change "
                               "that failed it.",
    "dynamo.graph_breaks": "Where Dynamo had to stop tracing (a print, data-dependent control flow, an "
                           "unsupported call) and why. Each break splits your function into several graphs.",
    "dynamo.compiles": "Every compile Dynamo made, as tlparse's index lists them, grouped by the line of yours "
                       "that called the compiled code: the function compiled, its graph's size, its graph "
                       "breaks and the guard that failed when it was a recompile.",
    "dynamo.recompiles": "Calls where a guard failed and the frame was compiled again, with the guard that failed.",
    "aot.joint_graph": "AOTAutograd traced the FX graph through PyTorch's dispatcher down to ATen operators and "
                       "functionalised it (no in-place mutation); since gradients are needed, it traced the "
                       "forward and the backward together: this joint graph takes the inputs and the incoming "
                       "gradients (tangents) and returns the outputs and the gradients, before the partitioner "
                       "splits it into the forward and backward graphs.",
    "aot.forward_graph": "The forward half of the graph AOTAutograd traced to ATen operators and functionalised: "
                         "in training, what the partitioner kept for the forward pass, returning the outputs and "
                         "the tensors saved for the backward; in inference (no gradients), the whole graph "
                         "Inductor compiles.",
    "aot.backward_graph": "The backward half the partitioner split off the joint graph: it takes the tensors the "
                          "forward saved and the incoming gradients (tangents) and computes the gradients of the "
                          "inputs and parameters, in ATen operators.",
    "aot.": "AOTAutograd traced the FX graph through PyTorch's dispatcher down to ATen operators, "
            "functionalised it (no in-place mutation) and, when gradients are needed, split the joint "
            "forward+backward graph into a forward and a backward graph with the tensors saved between them.",
    "inductor.pre_grad_graph": "The graph Inductor received, after its pre-grad passes (before AOTAutograd).",
    "inductor.post_grad_graph": "The ATen graph after Inductor's post-grad passes (pattern rewrites, "
                                "decompositions): the last FX form before lowering to Inductor IR.",
    "inductor.ir_pre_fusion": "Inductor's loop-level IR: one node per buffer it must compute, before the "
                              "scheduler fuses them.",
    "inductor.ir_post_fusion": "The same IR after fusion: each fused group becomes one kernel.",
    "inductor.fusion": "The scheduler's fusion decisions: which nodes it fused and why it refused the others.",
    "inductor.output_code": "The Python module Inductor generated: the kernels (C++/OpenMP on CPU, Triton on "
                            "GPU) and the wrapper `call` function that allocates buffers and launches them in "
                            "order. This is the code that actually runs when you call the compiled model.",
    "kernel:": "One kernel Inductor generated, with the fused operators it implements.",
    "triton.source": "The Triton kernel as written in your program, the function the stages below compile.",
    "triton.source@pytorch": "The Triton kernel Inductor generated for this fused group of operators, as the file "
                             "it wrote (named by its hash) holds it: the stages below compile this code.",
    "triton.source@gluon": "The Gluon kernel as written in your program: Triton's lower-level language, with the "
                           "layouts and shared memory written explicitly; Gluon starts at TTGIR (no TTIR).",
    "triton.source@helion": "The Triton code Helion generated from your kernel for this config, the kernel the "
                            "stages below compile.",
    "triton.ttir": "Triton IR: the kernel in the `tt` MLIR dialect, target-independent, with tensors of "
                   "blocks and pointer arithmetic.",
    "triton.ttgir": "TritonGPU IR: the same program with layouts that assign tensor elements to threads, "
                    "warps and shared memory, chosen for the target.",
    "triton.llir": "LLVM IR lowered from TTGIR, with NVVM/AMDGPU intrinsics.",
    "triton.ptx": "PTX, NVIDIA's virtual ISA, as LLVM's NVPTX backend wrote it. Open TTGIR beside it and hover a "
                  "line: the lines it became light up, by the compiler's own locations (`.loc`), also inside "
                  "inlined helpers such as tl.max.",
    "triton.amdgcn": "AMDGCN assembly for the AMD target.",
    "triton.sass": "SASS, the real machine code ptxas assembled from the PTX, disassembled with the NVIDIA "
                   "tools that ship inside the Triton wheel.",
    "triton.passes": "Every MLIR pass Triton ran, in order, and whether it changed the IR.",
    "triton.metadata": "What the compiled kernel needs to launch: warps, stages, shared memory, registers.",
    "dynamo.fx_graph_drawing": "The Dynamo FX graph drawn as a graph: one box per node, arrows from each value to "
                               "the nodes that use it, placeholders (inputs) at the top and the output at the bottom.",
    "inductor.estimates": "Inductor's scheduler's own figures for each kernel after fusion: the bytes it reads and "
                          "writes and, for GPU kernels it can place on a roofline, its estimated runtime. "
                          "Estimates, not measurements.",
    "kernels.resources": "Every compiled GPU kernel, one row per config: the lines of your source it came from, "
                         "warps, stages, registers per thread, spills, shared memory and the theoretical occupancy "
                         "on its target, from the compiler's own metadata and ptxas. Sort by a column; a kernel's "
                         "name opens its metadata.",
    "kernels.resources@host": "Every kernel Inductor wrote for the host CPU (C++, in its output code), one row "
                              "each, with the lines of your source it came from; its name opens its code. Sort by "
                              "a column. Registers, spills, shared memory and occupancy are a GPU kernel's figures: "
                              "a GPU target's job shows them here.",
    "run.kernels": "PyTorch's profiler over one call of the compiled model: which operators and kernels ran, how "
                   "often, and the time each took on the CPU and the device.",
    "run.notices": "What irscope answered for your program instead of running it as written on a virtual GPU (a "
                   "check that compares values, a benchmark), each at its line.",
    "triton.launches": "Every kernel launch the program made: grid, arguments and the compiled config launched "
                       "(on a virtual GPU: recorded, not run).",
    "helion.config": "The Helion config this kernel was compiled with: block sizes, loop orders, warps, stages "
                     "and the other choices Helion's autotuner searches over.",
    "helion.config_space": "Every dimension of the kernel's config space as Helion's ConfigSpec describes it: "
                           "what the autotuner may choose for each block size, loop and flag.",
    "helion.triton_code": "The Triton kernel Helion generated from your kernel for that config, and the host "
                          "function that launches it: the Triton stages below compile this code.",
    "helion.failed_samples": "Configs Helion's autotuner tried that failed to compile or run, with why.",
    "cute.ir": "The CuTe DSL program as MLIR, as the CuTe DSL compiler produced it before lowering: layouts, "
               "copies and MMA atoms as cute dialect operations.",
    "cute.ir_clean": "The same MLIR without location attributes, to read the program's structure.",
    "cute.ptx": "PTX the CuTe DSL compiler generated for the kernel. Its `.loc` lines link to your source.",
    "cute.sass": "SASS, the machine code ptxas assembled from the PTX, disassembled with nvdisasm.",
    "cute.metadata": "What the compiled CuTe kernel needs to launch: its entry name, registers, shared memory.",
    "cute.launches": "Every kernel launch the program made: grid, block and cluster shape, shared memory.",
    "distributed.placements": "How each parameter and activation is laid out over the device mesh (DTensor "
                              "placements: Shard, Replicate, Partial), rank by rank.",
    "distributed.collectives": "Every collective the compiled program issues (all-gather, reduce-scatter, "
                               "all-reduce...), its size, its group of ranks and its estimated time on the link.",
    "export.program": "torch.export's ExportedProgram: one ATen graph of the whole model with its input and "
                      "output signature, the graph AOTInductor compiles.",
    "aoti.wrapper": "AOTInductor's C++ wrapper: the code that allocates buffers and launches the kernels, "
                    "compiled into the model's shared library.",
    "aoti.kernels": "The kernels AOTInductor generated and compiled into the package.",
    "aoti.package": "What the .pt2 package AOTInductor wrote holds: the shared library, its weights and metadata.",
    "import.origin": "Where the imported log came from and what irscope read from it.",
    "fake.": "A stage of the test pipeline `fake` (it runs no compiler).",
    "xla.jitted": "Every module your program's jax.jit calls handed XLA to compile: each of your own functions "
                  "with the lines that define and call it, as the program compiled it with XLA's dump on (for a GPU "
                  "target, compiled again by irscope from the module JAX dumped), "
                  "its stages in a group of their own; then the operations run eagerly.",
    "xla.input": "The module exactly as XLA received it, before any pass.",
    "xla.stablehlo": "The StableHLO module JAX lowered your function to (jax.jit(...).lower(...)): the program "
                     "XLA compiles, with the shardings you asked for as attributes.",
    "xla.passes": "Every HLO pass XLA ran, in order, and whether it changed the module: pick a pass to see the "
                  "module after it, or diff it with the one before.",
    "xla.pass:@before_optimizations": "The HLO module as XLA received it, before any of its passes: diff it "
                                      "with the first pass to see what that pass did.",
    "xla.pass:": "The HLO module after one of XLA's passes (XLA's --xla_dump_hlo_pass_re dump): diff it with the "
                 "previous pass to see what the pass did.",
    "xla.sharding": "The sharding XLA propagated to every instruction before partitioning (GSPMD or Shardy): "
                    "how each value is split over the device mesh.",
    "xla.spmd": "The module after SPMD partitioning: the per-device program, with the collectives "
                "(all-gather, reduce-scatter, all-reduce) the partitioner inserted.",
    "xla.optimized": "The HLO module after all of XLA's optimisations: fusions, layouts and the scheduled order, "
                     "the program XLA turns into code. Each instruction's metadata names the op and your line.",
    "xla.schedule": "The order XLA's scheduler put the instructions in, with the asynchronous collectives' start "
                    "and done and what overlaps them.",
    "xla.buffer_assignment": "XLA's buffer assignment: which values share memory, each allocation's size, and "
                             "what is live at the peak.",
    "xla.memory": "Live bytes over program order, from XLA's buffer assignment: the peak and the buffers live "
                  "there.",
    "xla.cost": "XLA's own cost analysis of the optimized module: FLOPs, bytes accessed and transcendentals, "
                "estimates from its cost model.",
    "xla.llvm_ir": "The LLVM IR XLA emitted for one fusion.",
    "xla.asm": "The machine code XLA's CPU backend produced, disassembled.",
    "xla.ptx": "The PTX XLA's GPU backend emitted for its fusions and kernels.",
    "xla.sass": "SASS, the machine code ptxas assembled from XLA's PTX, disassembled with nvdisasm.",
    "xla.triton": "A fusion XLA's GPU backend emitted through Triton: its Triton IR.",
    "xla.fusions": "Every fusion in the optimized module: what it fused, its kind and its emitter.",
    "xla.debug_options": "The XLA debug options this compile ran with: the defaults and what you overrode.",
    "xla.graph": "The optimized module drawn as a graph of its computations and fusions.",
}


# A `prefix@variant` entry explains the stages of that prefix a variant names instead: the language
# that made the stage (`triton.source` of a Gluon kernel) or what the stage holds, its meta
# `explained_as` (a bytecode stage with only the original bytecode) or its key's last part (XLA's
# `before_optimizations` snapshot).


def explanation_for(key: str, language: str = "", meta: dict | None = None) -> str:
    """The paragraph for stage `key`, by the longest prefix that matches, the variant for what the
    stage holds (its meta's `explained_as`, its key's end) or its job's `language` where there is one."""
    best = ""
    for prefix in EXPLANATIONS:
        if "@" not in prefix and key.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    variants = ((meta or {}).get("explained_as"), key.rsplit("/", 1)[-1].rsplit(":", 1)[-1], language)
    for variant in variants:
        if variant and f"{best}@{variant}" in EXPLANATIONS:
            return EXPLANATIONS[f"{best}@{variant}"]
    return EXPLANATIONS.get(best, "")
