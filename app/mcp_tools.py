"""irscope's tools for agents, as an MCP server (the official `mcp` SDK's MCPServer): list the
languages, compile, read a stage, diff two stages, list the lessons, compare two jobs, read a job's
kernel resource table and its reproducer, scan the installed toolchains' versions.

The tools do what the JSON API does, the same way: every job is made through the service's one
admission (`Admission.submit`: sandbox refusal, the client's and the queue's caps, the storage
quotas, the client's rate), and a `Refused` becomes an MCP error whose code is its kind's
`mcp_code` and whose data names the kind. Every answer is bounded: a text longer than
`mcp_max_result_kb` is cut at a line and says where to go on; a compile waits at most
`mcp_compile_wait_s` and otherwise answers with the job's id to ask again (`job_status`), and only
so many calls wait at once (`WaitSlots`: each waiting HTTP call holds a web thread); diffs go
through the pages' bounded diff processes (app/stage_diffs.py).

No Flask here: `irscope mcp` (stdio) serves the same tools from an embedded service, and the
`/mcp` route (app/mcp_server.py) from the web process's. Store reads run in worker threads, so the
event loop that serves MCP never waits on the database.
"""
from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from app import lessons as lesson_files
from app.stage_diffs import Diffs
from compiler import registry
from compiler.errors import ErrorKind, Refused
from compiler.pipeline import TOOLCHAIN_OPTION
from service import job_diff, stage_reader, toolchain_envs
from service.configure import Service
from service.glance import glance
from service.store import Job

INSTRUCTIONS = """irscope compiles ML code and shows every intermediate stage the compiler produced:
PyTorch (torch.compile: Dynamo's FX graphs, AOTAutograd's joint/forward/backward graphs, Inductor's
IR, fusion decisions and output code, Triton kernels down to PTX and SASS), Triton, Gluon, Helion and
CuTe kernels (TTIR, TTGIR, LLVM IR, PTX, SASS, ptxas's register/spill report) and XLA (HLO pass by
pass, buffer assignment, schedules). GPU targets that the server does not have are compiled on a
virtual device: you get PTX, SASS and registers for an H100 without one.

Typical loop: list_languages (options), compile (returns the job id and its stage list), get_stage
for the stages you need (inductor.output_code, triton.ptx:<kernel>, triton.sass:<kernel>,
xla.optimized), kernel_resources for registers/spills/occupancy, change an option or the source,
compile again, then compare_jobs or diff_stages. Jobs are cached: the same request is answered at
once. Every result is bounded in size and says when it was cut and how to get the rest."""

# What each family of stage keys is, for the tool descriptions.
STAGE_GUIDE = """Stage keys (a key without its ":qualifier" picks the first of its kind):
- source: your input. run.stdout: what your program printed.
- dynamo.fx_graph:<compile id>: the FX graph Dynamo captured; dynamo.graph_breaks, dynamo.guards:<id>.
- aot.forward_graph / aot.backward_graph / aot.joint_graph:<id>: AOTAutograd's graphs (training).
- inductor.pre_grad / inductor.post_grad / inductor.ir / inductor.fusion:<id>: Inductor's passes.
- inductor.output_code:<id>[.backward]: the Python (or C++) module Inductor generated: kernels and
  the wrapper calling them. Ask for it first to see what torch.compile made of a model.
- triton.ttir / triton.ttgir / triton.llir / triton.ptx / triton.sass:<kernel>: one Triton kernel
  through Triton's compiler; triton.ptxas:<kernel> is ptxas's report. SASS is what the GPU runs.
- kernels.resources: one row per GPU kernel: registers, spills, shared/local memory, occupancy.
- xla.stablehlo, xla.before_optimizations, xla.optimized, xla.pass:<n>, xla.memory, xla.schedule:
  XLA's input, HLO before and after its passes, each pass's snapshot, buffers, the schedule. A JAX
  program that calls jax.jit itself has them per jitted function: xla.optimized:<module> (jit_f),
  xla.pass:<module>/<n>, ...; xla.jitted lists the modules."""


@dataclass
class Backend:
    """What the tools run against: the service (store, jobs, admission, settings), the bounded
    diffs, who the client is for this call (an address, for the admission's per-client limits),
    and the base URL links are made from ("" where there is none to give)."""

    service: Service
    diffs: Diffs
    client: Callable[[], str]
    base_url: Callable[[], str] = lambda: ""


def mcp_error(refused: Refused) -> MCPError:
    """A refusal as an MCP error: the kind's JSON-RPC code, its sentence, and its kind in the data."""
    data: dict[str, Any] = {"kind": str(refused.kind)}
    if refused.retry_after:
        data["retry_after_s"] = refused.retry_after
    return MCPError(refused.kind.mcp_code, f"{refused.kind}: {refused.message}", data)


class WaitSlots:
    """The calls that may wait for a job at once (`compile`, `job_status`): at most `total` in this
    process and `per_client` for one client. Over HTTP each waiting call holds one of the web
    server's threads for its wait (app/mcp_server.py): unbounded, ten waits of one client left
    ordinary pages unanswered for half a minute. A call refused a slot is told when one frees."""

    def __init__(self, total: int, per_client: int):
        self.total, self.per_client = max(total, 1), max(per_client, 1)
        self._lock = threading.Lock()
        self._held: dict[int, tuple[str, float]] = {}  # token -> (client, when its wait ends)
        self._tokens = itertools.count()

    def take(self, client: str, wait_s: float) -> int:
        """A slot for a wait of up to `wait_s` seconds, or Refused(RateLimited) with retry_after."""
        now = time.monotonic()
        with self._lock:
            mine = [end for who, end in self._held.values() if who == client]
            if len(mine) >= self.per_client:
                raise self._refused(f"this client already waits for {len(mine)} jobs at once (setting "
                                    f"mcp_max_waits_per_client)", min(mine) - now)
            if len(self._held) >= self.total:
                raise self._refused(f"{len(self._held)} calls already wait for jobs on this server (setting "
                                    f"mcp_max_waits)", min(end for _, end in self._held.values()) - now)
            token = next(self._tokens)
            self._held[token] = (client, now + wait_s)
            return token

    def give_back(self, token: int) -> None:
        with self._lock:
            self._held.pop(token, None)

    @staticmethod
    def _refused(why: str, free_in_s: float) -> Refused:
        return Refused(ErrorKind.RateLimited, f"no wait now: {why}; call again with wait_s=0 for the status at once, "
                                              "or later to wait", retry_after=max(1, math.ceil(free_in_s)))


def _not_found(message: str) -> Refused:
    return Refused(ErrorKind.NotFound, message)


class Tools:
    """The tools' work, synchronous (run in worker threads by `build`)."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.svc = backend.service
        mcp = self.svc.web.mcp
        self.max_bytes = mcp.max_result_bytes
        self.wait_s = mcp.compile_wait_s
        self.waits = WaitSlots(mcp.max_waits, mcp.max_waits_per_client)

    # --- helpers ------------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return self.backend.base_url().rstrip("/") + path

    def _job(self, job_id: str) -> Job:
        job = self.svc.store.get_job(str(job_id))
        if job is None:
            raise _not_found(f"no job {job_id!r}")
        return job

    def _resolve(self, job: Job, key: str) -> str:
        keys = [s.key for s in job.stages]
        if key in keys:
            return key
        found = next((k for k in keys if ":" not in key and k.startswith(key + ":")), None)
        if found is None:
            near = [k for k in keys if k.split(":", 1)[0] == key.split(":", 1)[0]][:20]
            hint = f"; stages of that kind: {', '.join(near)}" if near else "; compile's result lists every stage"
            raise _not_found(f"job {job.id} has no stage {key!r}{hint}")
        return found

    def summary(self, job: Job, cached: bool | None = None, waited_s: float | None = None) -> dict[str, Any]:
        """A job as an agent reads it: status, error with its line, the stage list with sizes."""
        stages = [{"key": s.key, "title": s.title, "group": s.group, "format": s.format, "bytes": s.size}
                  for s in job.stages]
        out: dict[str, Any] = {"job": job.id, "status": job.status, "language": job.request.language,
                               "options": job.request.options, "url": self._url(f"/j/{job.id}")}
        if cached is not None:
            out["cached"] = cached
        if job.progress and not job.finished:
            out["progress"] = job.progress
        if job.error is not None:
            out["error"] = job.error.to_json()
        facts = glance(self.svc.store, job)
        if facts:  # what the compiler did, each fact naming the stage that shows it (service/glance.py)
            out["summary"] = [f.to_json() for f in facts]
        if not job.finished:
            out["next"] = (f"the job is {job.status}{f' after {waited_s:.0f} s' if waited_s else ''}: call job_status "
                           f"with job_id={job.id!r} to wait for it (each call waits up to {self.wait_s:g} s)")
        cap = 400
        out["stage_count"] = len(stages)
        out["stages"] = stages[:cap]
        if len(stages) > cap:
            out["stages_cut"] = f"the first {cap} of {len(stages)} stages are listed; get_stage takes any key"
        if any(s.key == "kernels.resources" for s in job.stages):
            out["kernel_resources"] = "this job has a kernel resource table: call kernel_resources"
        if job.finished and registry.get(job.request.language).reproducer(job.request, job.toolchain, job.id):
            out["reproducer"] = self._url(f"/j/{job.id}/reproducer.py")
        return self._fit(out)

    def _fit(self, result: dict[str, Any]) -> dict[str, Any]:
        """Keep a result within the bound by shortening its stage list (texts are cut where made)."""
        while len(json.dumps(result, default=str)) > self.max_bytes and len(result.get("stages") or []) > 10:
            result["stages"] = result["stages"][: len(result["stages"]) // 2]
            result["stages_cut"] = (f"the first {len(result['stages'])} of {result['stage_count']} stages are listed "
                                    f"(results are kept under {self.max_bytes // 1024} KiB, setting "
                                    "mcp_max_result_kb); get_stage takes any key")
        return result

    def _cut_lines(self, text: str, budget: int) -> tuple[str, int]:
        """The longest head of `text` ending at a line within `budget` bytes, and its line count."""
        data = text.encode("utf-8", "replace")
        if len(data) <= budget:
            return text, text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        head = data[:budget].decode("utf-8", "ignore")
        cut = head.rfind("\n")
        head = head[:cut + 1] if cut >= 0 else head
        return head, head.count("\n") or 1

    # --- the tools ----------------------------------------------------------------------------
    def list_languages(self) -> dict[str, Any]:
        from compiler.targets import TARGETS  # the target table imports no compiler
        out = []
        for key in self.svc.jobs.config.languages:
            p = registry.get(key)
            options = [{"name": o.name, "kind": o.kind, "default": o.default, "help": o.help,
                        "choices": list(o.choices)} for o in p.options]
            targets = next((o["choices"] for o in options if o["name"] == "target"), [])
            out.append({"key": key, "title": p.title, "targets": targets, "options": options,
                        "example": p.example[:1500]})
        return {"languages": out, "virtual_gpu_targets": list(TARGETS),
                "note": "a GPU target the server has no device for compiles on a virtual one: every stage, PTX and "
                        "SASS, registers; nothing runs, so there are no timings"}

    def toolchains(self) -> dict[str, Any]:
        config = self.svc.jobs.config
        return {"toolchains": toolchain_envs.listing(config.toolchains_dir, config.languages),
                "note": "compile's `toolchain` names one (its languages list what it serves); compare_jobs of the "
                        "same source on two toolchains pairs every stage and counts what changed"}

    def compile(self, client: str, language: str, source: str, options: dict[str, Any] | None,
                toolchain: str | None = None) -> tuple[Job, bool]:
        options = dict(options or {}, **({TOOLCHAIN_OPTION: toolchain} if toolchain else {}))
        request = self.svc.jobs.parse({"language": language, "source": source, "options": options})
        (job, known), = self.svc.admission.submit([request], client)
        return job, known

    def status(self, job_id: str) -> Job:
        return self._job(job_id)

    def get_stage(self, job_id: str, key: str, page: int | None, first_line: int | None, last_line: int | None,
                  as_json: bool) -> dict[str, Any]:
        job = self._job(job_id)
        key = self._resolve(job, key)
        per_page = self.svc.web.stage_page_lines
        if page is not None:
            read = stage_reader.page(self.svc.store, job.id, key, max(int(page), 1), per_page)
        else:  # one read is bounded in lines too
            read = stage_reader.lines(self.svc.store, job.id, key, int(first_line or 1),
                                      int(last_line) if last_line else None, per_page * 4)
        stage, lines, first, last, text = read.stage, read.lines, read.first, read.last, read.text
        from viewers.explanations import explanation_for
        out: dict[str, Any] = {"job": job.id, "key": stage.key, "title": stage.title, "group": stage.group,
                               "format": stage.format, "lines": lines, "bytes": stage.size}
        explanation = explanation_for(stage.key, job.request.language, stage.meta)
        if explanation:
            out["about"] = explanation
        if stage.meta.get("note"):
            out["note"] = stage.meta["note"]
        budget = self.max_bytes - 2048
        if as_json:
            source_map, meta = read.source_map(), stage.meta
            extra = len(json.dumps([source_map, meta], default=str))
            if extra > budget // 2:
                source_map = source_map[: max(len(source_map) * (budget // 2) // max(extra, 1), 0)]
                out["source_map_cut"] = True
            out["source_map"] = source_map  # [line of this stage, line of the source]
            out["meta"] = meta if len(json.dumps(meta, default=str)) < budget // 4 else "too large to include"
            budget -= len(json.dumps([out["source_map"], out["meta"]], default=str))
        body, count = self._cut_lines(text, max(budget, 1024))
        out["first_line"], out["last_line"] = first, (last if body == text else first + count - 1)
        out["text"] = body
        if out["last_line"] < lines:
            reason = (f"cut at {self.max_bytes // 1024} KiB (setting mcp_max_result_kb)" if body != text
                      else f"one answer holds at most {per_page * 4} lines")
            out["truncated"] = True
            out["next"] = (f"lines {out['first_line']}-{out['last_line']} of {lines} ({reason}): call get_stage with "
                           f"first_line={out['last_line'] + 1} for the rest")
        return out

    def diff(self, job_id: str, stage: str, other_stage: str, other_job_id: str | None) -> dict[str, Any]:
        job_a = self._job(job_id)
        job_b = self._job(other_job_id) if other_job_id else job_a
        key_a, key_b = self._resolve(job_a, stage), self._resolve(job_b, other_stage)
        return self._diff(job_a, key_a, job_b, key_b)

    def _diff(self, job_a: Job, key_a: str, job_b: Job, key_b: str) -> dict[str, Any]:
        store = self.svc.store
        head_a, head_b = store.stage_page(job_a.id, key_a, 0, 0), store.stage_page(job_b.id, key_b, 0, 0)
        name_a = f"{job_a.id}:{key_a}" if job_a.id != job_b.id else key_a
        name_b = f"{job_b.id}:{key_b}" if job_a.id != job_b.id else key_b
        out: dict[str, Any] = {"a": {"job": job_a.id, "stage": key_a}, "b": {"job": job_b.id, "stage": key_b}}
        refused = self.backend.diffs.refusal_sentence([(name_a, head_a[1], head_a[0].size),
                                                       (name_b, head_b[1], head_b[0].size)])
        if refused:
            out["diff"], out["refused"] = None, refused
            return out
        text_a, text_b = store.stage_text(job_a.id, key_a)[1], store.stage_text(job_b.id, key_b)[1]
        diff, refused = self.backend.diffs.unified(("pair", job_a.id, key_a, job_b.id, key_b), text_a, text_b,
                                                   name_a, name_b)
        if diff is None:
            out["diff"], out["refused"] = None, refused
            return out
        out["identical"] = text_a == text_b
        lines = diff.split("\n")
        out["changed_lines"] = {"removed": sum(1 for x in lines if x.startswith("-") and not x.startswith("---")),
                                "added": sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))}
        body, _ = self._cut_lines(diff, self.max_bytes - 2048)
        out["diff"] = body
        if body != diff:
            out["truncated"] = (f"the unified diff is {len(diff.encode()):,} bytes; cut at "
                                f"{self.max_bytes // 1024} KiB (setting mcp_max_result_kb): read both stages with "
                                "get_stage for the rest")
        return out

    def lessons(self) -> dict[str, Any]:
        every = lesson_files.load(self.svc.web.examples_dir or lesson_files.DEFAULT_DIR)
        offered = [lesson for lesson in every if lesson.language in self.svc.jobs.config.languages]
        out = []
        for lesson in offered:
            entry = {"slug": lesson.slug, "title": lesson.title, "topic": lesson.topic, "language": lesson.language,
                     "options": lesson.request.options, "first_stage": lesson.first_stage,
                     "explanation": lesson.explanation, "url": self._url(f"/examples/{lesson.slug}")}
            if lesson.compare is not None:
                entry["compare"] = {"title": lesson.compare.title, "options": lesson.compare.request.options,
                                    "stage": lesson.compare.stage, "stage_b": lesson.compare.stage_b}
            out.append(entry)
        return {"lessons": out, "note": "compile a lesson's source with compile(language, source, options): "
                                        "get_lesson_source gives its source"}

    def lesson_source(self, slug: str) -> dict[str, Any]:
        every = lesson_files.load(self.svc.web.examples_dir or lesson_files.DEFAULT_DIR)
        lesson = lesson_files.by_slug(tuple(every), slug)
        if lesson is None or lesson.language not in self.svc.jobs.config.languages:
            raise _not_found(f"no lesson {slug!r}")
        out = {"slug": slug, "language": lesson.language, "options": lesson.request.options,
               "source": lesson.request.source}
        if lesson.compare is not None:
            out["compare"] = {"options": lesson.compare.request.options, "source": lesson.compare.request.source}
        return out

    def compare(self, client: str, job_a: str, job_b: str, stage_a: str | None,
                stage_b: str | None) -> dict[str, Any]:
        from app.compare import default_stages, differences
        a, b = self._job(job_a), self._job(job_b)
        (a, _), (b, _) = self.svc.admission.submit([a, b], client)
        comparison = self.svc.jobs.comparison(a, b)
        out: dict[str, Any] = {"comparison": comparison, "url": self._url(f"/c/{comparison}"),
                               "a": {"job": a.id, "status": a.status, "error": a.error.to_json() if a.error else None},
                               "b": {"job": b.id, "status": b.status, "error": b.error.to_json() if b.error else None},
                               "differences": [{"what": what, "a": va, "b": vb}
                                               for what, va, vb in differences(a.request, b.request)]}
        for side, job in (("a", a), ("b", b)):
            run = (job.timings or {}).get("run") or {}
            picked = {k: run[k] for k in ("eager_ms", "compiled_ms", "speedup", "where") if k in run}
            if picked:
                out[side]["run"] = picked
        if not (a.finished and b.finished):
            out["next"] = "a job is still running: call job_status for it, then compare_jobs again"
            return out
        if stage_a or stage_b:
            key_a = self._resolve(a, stage_a or stage_b or "")
            key_b = self._resolve(b, stage_b or stage_a or "")
        else:
            key_a, key_b = default_stages(a, b, None)
        if key_a and key_b:
            out["diff"] = self._diff(a, key_a, b, key_b)
        changed = job_diff.compare(self.svc.store, a, b).to_json()  # what changed, counted; pairs on the page
        out["changes"] = {k: changed[k] for k in ("paired", "changed", "summary")}
        return out

    def kernel_resources(self, job_id: str) -> dict[str, Any]:
        job = self._job(job_id)
        found = self.svc.store.stage_text(job.id, "kernels.resources")
        if found is None:
            return {"job": job.id, "resources": None,
                    "why": "this job has no kernel resource table: it is made for GPU code (Triton, Gluon, Helion, "
                           "CuTe, PyTorch with a cuda:* target, XLA with a GPU target)" +
                           ("" if job.finished else "; the job has not finished yet")}
        stage, text = found
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out = {"job": job.id, "key": stage.key, "resources": value}
        encoded = json.dumps(out, default=str)
        if len(encoded) > self.max_bytes:
            body, _ = self._cut_lines(text, self.max_bytes - 2048)
            out = {"job": job.id, "key": stage.key, "resources_text": body,
                   "truncated": f"cut at {self.max_bytes // 1024} KiB (setting mcp_max_result_kb): get_stage "
                                "kernels.resources with first_line for the rest"}
        return out

    def reproducer(self, job_id: str) -> dict[str, Any]:
        job = self._job(job_id)
        script = registry.get(job.request.language).reproducer(job.request, job.toolchain, job.id)
        if script is None:
            return {"job": job.id, "script": None,
                    "why": f"irscope makes no reproducer for {job.request.language} jobs"}
        body, _ = self._cut_lines(script, self.max_bytes - 1024)
        out = {"job": job.id, "url": self._url(f"/j/{job.id}/reproducer.py"), "script": body}
        if body != script:
            out["truncated"] = "the script is longer than one result: download it from url"
        return out


def build(backend: Backend) -> MCPServer:
    """The MCP server of irscope's tools over `backend`."""
    tools = Tools(backend)
    # The SDK configures the root logger (logging.basicConfig) when a server is made; irscope's
    # processes configure their own logging, so it is put back as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = MCPServer("irscope", title="irscope: an explorer for ML compilers", instructions=INSTRUCTIONS,
                       log_level="WARNING")
    root.handlers[:], root.level = handlers, level

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except Refused as refused:
            raise mcp_error(refused) from None

    async def wait(job_id: str, wait_s: float | None, cached: bool | None = None,
                   refused_then: Callable[[Refused], dict[str, Any]] | None = None) -> dict[str, Any]:
        """The job's summary once it finished or `wait_s` passed. A wait holds a slot of
        `tools.waits`; without one, the call is refused (`refused_then`: answered at once instead)."""
        limit = tools.wait_s if wait_s is None else min(max(float(wait_s), 0.0), tools.wait_s)
        started = time.monotonic()
        job = await call(tools.status, job_id)
        if job.finished or limit <= 0:
            return await call(tools.summary, job, cached, 0.0)
        try:
            token = tools.waits.take(backend.client(), limit)
        except Refused as refused:
            if refused_then is None:
                raise mcp_error(refused) from None
            return await call(tools.summary, job, cached, 0.0) | refused_then(refused)
        try:
            while not job.finished and time.monotonic() - started < limit:
                await anyio.sleep(0.25)
                job = await call(tools.status, job_id)
        finally:
            tools.waits.give_back(token)
        return await call(tools.summary, job, cached, time.monotonic() - started)

    @server.tool(description=f"The languages this irscope server compiles ({', '.join(registry.offered())}, "
                             "...), each with its options (name, kind, default, choices, "
                             "help), its targets (host CPU, cuda:sm_80/sm_90/sm_100, XLA GPU topologies) and an "
                             "example source showing the conventions (PyTorch: define `model` and "
                             "`example_inputs`, or KernelBench's Model/get_inputs/get_init_inputs). Call it first.")
    async def list_languages() -> dict:
        return await call(tools.list_languages)

    @server.tool(description="Compile `source` in `language` with `options` (see list_languages; omitted options "
                             "take their defaults). Returns the job id, its status (done, failed, queued, running), "
                             "the error with its kind and the line of your source it points at, and the list of "
                             "stages (key, title, group, format, bytes) to read with get_stage. Waits for the job "
                             "up to `wait_s` seconds (at most the server's mcp_compile_wait_s); if it has not "
                             "finished by then, call job_status with the job id. A request compiled before is "
                             "answered at once (cached: true). Refusals (rate limit, full queue) are MCP errors "
                             "whose data names the kind. `toolchain`: an installed toolchain to compile in (another "
                             "release of torch, triton or jax; list_toolchains), the server's own by default.\n\n"
                             + STAGE_GUIDE)
    async def compile(language: str, source: str, options: dict[str, Any] | None = None,
                      wait_s: float | None = None, toolchain: str | None = None) -> dict:
        client = backend.client()
        job, known = await call(tools.compile, client, language, source, options, toolchain)
        # The job is admitted whether or not this call may wait for it: a refused wait answers at once.
        return await wait(job.id, wait_s, known, lambda refused: {"wait_refused": refused.message,
                                                                  "retry_after_s": refused.retry_after})

    @server.tool(description="The toolchains installed on this server (the default first): each a pinned release "
                             "of the compilers (versions of torch, triton, helion, jax, jaxlib), the languages it "
                             "serves and what it supports (virtual GPU targets, XLA:GPU, Helion, AOTInductor). "
                             "compile's `toolchain` picks one; compare_jobs of the same source on two of them says "
                             "what the release changed.")
    async def list_toolchains() -> dict:
        return await call(tools.toolchains)

    @server.tool(description="A job's status, error and stage list (as compile returns them), waiting up to "
                             "`wait_s` seconds (at most the server's mcp_compile_wait_s) for it to finish.")
    async def job_status(job_id: str, wait_s: float | None = None) -> dict:
        return await wait(job_id, wait_s)

    @server.tool(description="The text of one stage of a job: the whole stage, a page (`page`, from 1, of the "
                             "server's stage_page_lines lines) or a line range (`first_line`..`last_line`, "
                             "1-based, inclusive). A long stage is cut at a line within the result bound; "
                             "the result then says which lines it holds and the first_line to ask for next. "
                             "`as_json`: also the stage's source map (pairs [line of this stage, line of your "
                             "source]) and metadata. `key` may omit its qualifier (\"inductor.output_code\" is "
                             "the first output code; \"triton.ptx\" the first kernel's PTX).\n\n" + STAGE_GUIDE)
    async def get_stage(job_id: str, key: str, page: int | None = None, first_line: int | None = None,
                        last_line: int | None = None, as_json: bool = False) -> dict:
        return await call(tools.get_stage, job_id, key, page, first_line, last_line, as_json)

    @server.tool(description="A unified diff of two stages: `stage` of job `job_id` against `other_stage` of the "
                             "same job, or of `other_job_id` (e.g. the same kernel's PTX with num_warps=4 and "
                             "8, or output code before and after a change). Bounded like the pages' diffs: two "
                             "very long stages are refused with a sentence (read them with get_stage instead), "
                             "and the diff text is cut within the result bound.")
    async def diff_stages(job_id: str, stage: str, other_stage: str, other_job_id: str | None = None) -> dict:
        return await call(tools.diff, job_id, stage, other_stage, other_job_id)

    @server.tool(description="Two jobs side by side (e.g. the same source compiled with two option sets, or two "
                             "sources): what their requests set differently, their run timings where they ran, "
                             "a link to the comparison page, and the diff of a pair of stages (`stage_a` of A "
                             "against `stage_b` of B; by default the output code, PTX or optimized HLO both "
                             "have).")
    async def compare_jobs(job_a: str, job_b: str, stage_a: str | None = None, stage_b: str | None = None) -> dict:
        return await call(tools.compare, backend.client(), job_a, job_b, stage_a, stage_b)

    @server.tool(description="The lessons of irscope's examples gallery: short programs each showing one compiler "
                             "behaviour (fusion, graph breaks, recompiles, autotuning, layouts, sharding), with "
                             "the options and the stage to look at first, and an optional variant to compare.")
    async def list_lessons() -> dict:
        return await call(tools.lessons)

    @server.tool(description="The source (and its variant's, if it has one) of a lesson from list_lessons, to "
                             "pass to compile.")
    async def get_lesson_source(slug: str) -> dict:
        return await call(tools.lesson_source, slug)

    @server.tool(description="The kernel resource table of a job's GPU kernels, when it has one: per kernel (each "
                             "autotune config its own row) registers per thread, spills, shared and local memory, "
                             "theoretical occupancy, as ptxas and the cubin report them; spilling kernels flagged. "
                             "Made for GPU targets, real or virtual (Triton, Gluon, Helion, CuTe, PyTorch with "
                             "target cuda:sm_*, XLA with a GPU target); a PyTorch job on the host lists Inductor's "
                             "C++ kernels with the source lines each came from (target cpu, no GPU figure).")
    async def kernel_resources(job_id: str) -> dict:
        return await call(tools.kernel_resources, job_id)

    @server.tool(description="A standalone Python script that re-runs a job's compile with plain torch, triton or "
                             "jax outside irscope (same options, with TORCH_TRACE / XLA dump flags / Triton's dump "
                             "directory set), writing the compiler's artifacts into a folder: for a bug report "
                             "upstream. Its header names the versions the job was compiled with.")
    async def get_reproducer(job_id: str) -> dict:
        return await call(tools.reproducer, job_id)

    _scan_tool(server, tools, call)
    return server


def _scan_tool(server: MCPServer, tools: Tools, call: Callable[..., Any]) -> None:
    """The `scan` tool: a version scan (service/scans.py) started through the same admission as
    POST /api/scan, waited for like a compile (a slot of `tools.waits`, at most mcp_compile_wait_s)."""
    backend = tools.backend

    def start(language: str, source: str, options: dict[str, Any] | None, stage: Any) -> str:
        scan, _ = tools.svc.scans.start({"language": language, "source": source, "options": options or {},
                                         "stage": stage}, backend.client())
        return scan.id

    def report(scan_id: str) -> dict[str, Any]:
        found = tools.svc.scans.report(scan_id)
        return tools.svc.scans.to_json(found, backend.base_url().rstrip("/"))

    @server.tool(description="A version scan, \"which release changed my kernel\": compile `source` in `language` "
                             "with `options` on every installed toolchain that can run it (oldest release of the "
                             "language's main package first: torch, triton or jax), compile-only, and compare "
                             "`stage` between consecutive toolchains. `stage`: omitted, the output code (Inductor's, "
                             "the kernels' PTX, the optimized HLO); a stage key or kind (\"triton.ttgir\"); "
                             "{\"ptx\": KERNEL}; {\"registers\": KERNEL or \"\"} (kernels.resources); "
                             "{\"regex\": PATTERN, \"stage\": KEY} (the list of its matches). Returns the scan id, "
                             "its page, each toolchain's job and status and, once every job ended within `wait_s` "
                             "(at most the server's mcp_compile_wait_s), the changes: from, to, stage, diff_url. "
                             "Jobs compiled before answer at once: call scan again with the same arguments to wait "
                             "longer; read a change with diff_stages on the two jobs.")
    async def scan(language: str, source: str, options: dict[str, Any] | None = None, stage: Any = None,
                   wait_s: float | None = None) -> dict:
        scan_id = await call(start, language, source, options, stage)
        limit = tools.wait_s if wait_s is None else min(max(float(wait_s), 0.0), tools.wait_s)
        started = time.monotonic()
        result = await call(report, scan_id)
        if result["status"] != "done" and limit > 0:
            try:
                token = tools.waits.take(backend.client(), limit)
            except Refused as refused:
                return result | {"wait_refused": refused.message, "retry_after_s": refused.retry_after}
            try:
                while result["status"] != "done" and time.monotonic() - started < limit:
                    await anyio.sleep(0.25)
                    result = await call(report, scan_id)
            finally:
                tools.waits.give_back(token)
        if result["status"] != "done":
            result["next"] = (f"the scan is still running after {time.monotonic() - started:.0f} s: call scan again "
                              "with the same arguments (the same scan; its finished jobs answer at once)")
        total = len(result["changes"])
        while len(json.dumps(result, default=str)) > tools.max_bytes and len(result["changes"]) > 10:
            result["changes"] = result["changes"][: len(result["changes"]) // 2]
            result["changes_cut"] = (f"the first {len(result['changes'])} of {total} changes (results are kept under "
                                     f"{tools.max_bytes // 1024} KiB); the scan's page lists them all")
        return result
