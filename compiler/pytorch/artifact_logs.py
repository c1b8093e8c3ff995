"""Collect PyTorch's artifact logs (the ones TORCH_LOGS="bytecode,fusion,ir_pre_fusion,ir_post_fusion"
prints) per compile id, without printing them.

These artifacts go to Python logging, not to the structured trace, so a handler on their loggers
keeps each record with the compile id that was current when Inductor emitted it.
"""
from __future__ import annotations

import logging
from typing import Any

ARTIFACTS = ("bytecode", "fusion", "ir_pre_fusion", "ir_post_fusion")


class _Collector(logging.Handler):
    def __init__(self, torch: Any):
        super().__init__(level=logging.DEBUG)
        self.torch = torch
        self.records: dict[tuple[str, str], list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        artifact = record.name.rsplit(".__", 1)[-1]
        try:
            cid = self.torch._guards.CompileContext.current_compile_id()
            cid_text = str(cid) if cid is not None else "?"
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a logging failure must not fail the compile
            return
        self.records.setdefault((cid_text, artifact), []).append(message)


def install(torch: Any, also_enable: tuple[str, ...] = ()) -> _Collector:
    """Enable the artifact loggers and route them to a collector (and nowhere else). `also_enable`
    names artifact logs another collector reads (torch._logging.set_logs resets every log it is
    not given, so all are switched on here, in one call)."""
    import torch._dynamo.convert_frame  # noqa: F401 - creates the bytecode artifact logger
    import torch._inductor.debug  # noqa: F401 - creates the ir_*_fusion artifact loggers
    import torch._inductor.scheduler  # noqa: F401 - creates the fusion artifact logger
    torch._logging.set_logs(**{name: True for name in ARTIFACTS + also_enable})
    collector = _Collector(torch)
    # Artifact loggers are named "<module>.__<artifact>".
    for logger_name in list(logging.root.manager.loggerDict):
        if any(logger_name.endswith(".__" + name) for name in ARTIFACTS):
            _attach(logging.getLogger(logger_name), collector)
    return collector


def _attach(logger: logging.Logger, collector: _Collector) -> None:
    logger.handlers = [collector]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)


def texts(collector: _Collector) -> dict[tuple[str, str], str]:
    """(compile id, artifact) -> the artifact's log text, records in emission order."""
    return {key: "\n".join(messages) for key, messages in collector.records.items()}
