"""Every kind of error irscope reports, in one enum: a job's error (`JobError.kind`, written by the
worker or the runner) and a refused request (`Refused`, raised by the service and the routes).

Each kind carries what its users need to act on it: the HTTP status of a request refused with it
(None for a job's error: the job itself is answered, with its error in it), whether a job that
failed with it is answered from the store next time like a result (the input's fault, so compiling
again would fail the same way), and the JSON-RPC error code an MCP client gets for it.
docs/api.md describes every kind (tests/test_docs.py reads this enum).
"""
from __future__ import annotations

from enum import StrEnum

# JSON-RPC codes for refused MCP tool calls: the reserved ones where they fit, server errors
# (-32000 to -32099) for the service's own refusals.
INVALID_PARAMS = -32602
NOT_FOUND = -32002
BUSY = -32001
UNAVAILABLE = -32003
INTERNAL = -32603


class ErrorKind(StrEnum):
    """The kinds of error, spelled as the API and the page show them."""

    def __new__(cls, value: str, status: int | None, reused: bool, mcp_code: int) -> "ErrorKind":
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status  # type: ignore[attr-defined]
        member.reused = reused  # type: ignore[attr-defined]
        member.mcp_code = mcp_code  # type: ignore[attr-defined]
        return member

    status: int | None
    reused: bool
    mcp_code: int

    # A job that failed because of its input: answered from the store next time.
    SyntaxError = "SyntaxError", None, True, INVALID_PARAMS
    InputError = "InputError", None, True, INVALID_PARAMS
    OptionError = "OptionError", None, True, INVALID_PARAMS
    UserCodeError = "UserCodeError", None, True, INVALID_PARAMS
    CompileError = "CompileError", None, True, INVALID_PARAMS
    # A job stopped by a limit (each message names its setting), or by irscope: compiled again next time.
    CompileTimeout = "CompileTimeout", None, False, BUSY
    WallTimeLimit = "WallTimeLimit", None, False, BUSY
    CpuTimeLimit = "CpuTimeLimit", None, False, BUSY
    MemoryLimit = "MemoryLimit", None, False, BUSY
    FileSizeLimit = "FileSizeLimit", None, False, BUSY
    ProcessLimit = "ProcessLimit", None, False, BUSY
    DiskLimit = "DiskLimit", None, False, BUSY
    ResultRuleError = "ResultRuleError", None, False, INTERNAL
    WorkerCrashed = "WorkerCrashed", None, False, INTERNAL
    BrokerUnavailable = "BrokerUnavailable", None, False, UNAVAILABLE
    InternalError = "InternalError", 500, False, INTERNAL
    # A request the service refused: no job was made.
    RequestError = "RequestError", 400, False, INVALID_PARAMS
    NotFound = "NotFound", 404, False, NOT_FOUND
    RequestTooLarge = "RequestTooLarge", 413, False, INVALID_PARAMS
    CrossSiteRequest = "CrossSiteRequest", 403, False, INVALID_PARAMS
    RateLimited = "RateLimited", 429, False, BUSY
    ClientQueueFull = "ClientQueueFull", 429, False, BUSY
    QueueFull = "QueueFull", 429, False, BUSY
    StorageQuota = "StorageQuota", 429, False, BUSY
    StorageFull = "StorageFull", 507, False, UNAVAILABLE
    SandboxUnavailable = "SandboxUnavailable", 503, False, UNAVAILABLE


# The kinds of a job whose failure is answered from the store like a result (ErrorKind.reused).
REUSED_KINDS = frozenset(kind for kind in ErrorKind if kind.reused)


class UserFacing(Exception):
    """An exception irscope's own code raises in the job to tell the user what their program asked
    for cannot be (a launch or a benchmark on a virtual GPU, a dtype CuTe has no type for): the
    user's line is named, as for the program's own errors. Any other exception raised by irscope's
    code is irscope's bug (compiler/user_code.py: raised_in_irscope)."""


class Refused(Exception):
    """A request the service turns down: its kind (how to answer it), the sentence saying why and
    what to do, and when it may be asked again (seconds; None: not a matter of waiting)."""

    def __init__(self, kind: ErrorKind, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.kind = ErrorKind(kind)
        self.message = message
        self.retry_after = retry_after

    def to_json(self) -> dict:
        return {"kind": str(self.kind), "message": self.message, "line": None}
