"""One paragraph per stage for learners: what this artifact is and what to look for in it."""
from __future__ import annotations

# Stage-key prefix -> explanation. The longest matching prefix wins.
EXPLANATIONS: dict[str, str] = {
    "source": "The program exactly as submitted. Lines in other stages that came from a source line share its "
              "colour; hover a line here or there to see its partners.",
    "run.stdout": "What the program printed while it was defined and run, in order.",
    "worker.log": "What the sandboxed worker process wrote to stdout and stderr: compiler warnings, log lines "
                  "and, when a job dies, its last words.",
    "dynamo.fx_graph": "TorchDynamo rewrote the Python bytecode of your forward and recorded every tensor "
                       "operation into an FX graph: this is it, as readable Python. Each node is one call; "
                       "what Dynamo could not trace caused a graph break instead of appearing here.",
    "dynamo.bytecode": "The frame's original bytecode and the bytecode Dynamo generated to replace it: the new "
                       "code checks the guards, calls the compiled graph and falls back to Python for the rest.",
    "dynamo.guards": "The conditions under which the compiled code stays valid (shapes, dtypes, globals, module "
                     "attributes). If one fails on a later call, Dynamo recompiles.",
    "dynamo.guards_explained": "The same guards in words, grouped by what they check: the tensors' dtype, device, "
                               "shape, stride and requires_grad; types and object identities; constant values "
                               "Dynamo specialised on; global state; conditions on symbolic sizes. For a "
                               "recompile, the guard of each earlier compile that failed and the input change "
                               "that failed it.",
    "dynamo.graph_breaks": "Where Dynamo had to stop tracing (a print, data-dependent control flow, an "
                           "unsupported call) and why. Each break splits your function into several graphs.",
    "dynamo.recompiles": "Calls where a guard failed and the frame was compiled again, with the guard that failed.",
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
    "triton.source": "The Triton kernel as written (or as Inductor generated it).",
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
    "xla.": "A stage of XLA's compilation, taken from XLA's own dumps and APIs.",
}


def explanation_for(key: str) -> str:
    best = ""
    for prefix in EXPLANATIONS:
        if key.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return EXPLANATIONS.get(best, "")
