"""Example programs for the XLA pipelines that a gallery can list: each is a source file beside
this module with the options to compile it with and what to look at."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    language: str  # the pipeline: "jax", "hlo", "stablehlo"
    file: str  # beside this module
    options: dict[str, Any] = field(default_factory=dict)
    look_at: str = ""

    def source(self) -> str:
        with open(os.path.join(_HERE, self.file), encoding="utf-8") as f:
            return f.read()


LESSONS: dict[str, Lesson] = {lesson.key: lesson for lesson in (
    Lesson("sharded-mlp-h100", "All-reduce overlapped with the next GEMM on 8 virtual H100s", "jax",
           "sharded_mlp_h100.py", {"target": "cuda:h100", "devices": 8},
           "Schedule: each all-reduce-start/all-reduce-done pair with the gradient GEMM (a Triton GEMM fusion, "
           "see Fusion decisions) scheduled between them, on the latency-hiding scheduler's estimated timeline; "
           "Partitioned HLO: the all-reduces the data-parallel sharding needs; PTX for sm_90a."),
)}
