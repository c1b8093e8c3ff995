"""Version scans: "which release changed my kernel". One source compiled on every installed
toolchain that can run it, in the version order of its language's main package (torch for
`pytorch`, triton for `triton` and `gluon`, jax for the XLA languages: the pipeline's first
`toolchain_packages`), and one stage compared between consecutive toolchains.

Each job is an ordinary job (option `toolchain: NAME`) made through the service's one Admission:
the client's and the queue's caps, the storage quotas and the rate counted per job created. A job
the store has already (the same request compiled before, by a scan or by hand) answers at once, so
the same scan asked again makes no job and is the same scan record.

What is compared (`StageSpec`): by default the output code (the first kind of `DEFAULT_STAGES` a
job has: Inductor's output code, the kernels' PTX, the optimized HLO); or the stages of a key or
kind; a kernel's PTX; the register counts of `kernels.resources`; the list of a regex's matches.
Texts are compared as the compiler wrote them except for where the toolchain is installed (its
environment's directory, which the runner already shows as <venv> or <toolchains>/NAME): that is one
placeholder for every toolchain, so a path alone is never a change. A failed job is compared by its
failure: a toolchain where the job fails next to one where it compiles is a change, never "no
change".
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import regex

from compiler import registry
from compiler.errors import ErrorKind, Refused
from compiler.pipeline import TOOLCHAIN_OPTION
from service import toolchain_envs
from service.admission import Admission
from service.jobs import RequestError, short_id
from service.store import Job, Scan, Store

# The stages a scan compares when it is not told: the first kind of these any of its jobs has.
DEFAULT_STAGES = ("inductor.output_code", "aoti.wrapper", "triton.ptx", "cute.ptx", "xla.optimized", "fake.lines")
MAX_KEY_CHARS = 300
MAX_PATTERN_CHARS = 500
REGEX_TIMEOUT_S = 2.0  # per stage text: a pattern that backtracks without end is stopped, and says so
MAX_MATCHES = 10_000
MAX_STAGES = 200  # stages of one job compared at most (a kind with more: the first ones)
_CACHED_VALUES = 4096
# A scan whose jobs do not all fit the client's cap now (max_jobs_per_client) starts what fits and
# waits for the rest: at most this many scans of one client wait at once; they are looked at this often.
MAX_WAITING_SCANS_PER_CLIENT = 2
PUMP_INTERVAL_S = 1.0

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class StageSpec:
    """What a scan compares (`stage` of POST /api/scan): one of
    - nothing (null, "", {}): the default output code (DEFAULT_STAGES);
    - "KEY" or {"stage": "KEY"}: the stage KEY, or every stage of a kind ("triton.ptx");
    - {"ptx": "KERNEL"}: kernel KERNEL's PTX;
    - {"registers": "KERNEL"}: its registers per thread in `kernels.resources` ("": every kernel's);
    - {"regex": "PATTERN", "stage": "KEY"}: the list of the pattern's matches (its groups, when it
      has any) in those stages (default: the default ones)."""

    stage: str = ""
    ptx: str = ""
    registers: str | None = None
    regex: str = ""

    @classmethod
    def parse(cls, value: Any) -> "StageSpec":
        if value is None or value == "":
            return cls()
        if isinstance(value, str):
            value = {"stage": value}
        if not isinstance(value, dict):
            raise RequestError('stage must be a stage key (a string), or an object with one of "stage", "ptx", '
                               '"registers", "regex" ("regex" may name a "stage" too)')
        unknown = sorted(set(value) - {"stage", "ptx", "registers", "regex"})
        if unknown:
            raise RequestError(f"stage: unknown field {unknown[0]!r}; a stage spec has one of \"stage\", \"ptx\", "
                               "\"registers\", \"regex\"")
        chosen = [k for k in ("ptx", "registers", "regex") if k in value]
        if len(chosen) > 1 or ({"stage", "ptx"} <= set(value)) or ({"stage", "registers"} <= set(value)):
            raise RequestError(f"stage: {', '.join(sorted(value))} cannot be asked together; \"stage\" goes with "
                               "\"regex\" only")
        for k, v in value.items():
            if k == "registers" and v is True:
                continue
            if not isinstance(v, str) or len(v) > (MAX_PATTERN_CHARS if k == "regex" else MAX_KEY_CHARS):
                raise RequestError(f"stage: {k} must be a string of at most "
                                   f"{MAX_PATTERN_CHARS if k == 'regex' else MAX_KEY_CHARS} characters")
            if k != "regex" and any(c.isspace() for c in v):
                raise RequestError(f"stage: {k} {v!r} has white space; stage keys and kernel names have none")
        if "regex" in value:
            if not value["regex"]:
                raise RequestError("stage: regex is empty")
            try:
                regex.compile(value["regex"])
            except regex.error as e:
                raise RequestError(f"stage: regex {value['regex']!r} is not a regular expression: {e}") from None
        if "ptx" in value and not value["ptx"]:
            raise RequestError("stage: ptx names the kernel whose PTX is compared; it is empty")
        registers = value.get("registers")
        return cls(stage=value.get("stage", ""), ptx=value.get("ptx", ""),
                   registers=None if registers is None else ("" if registers is True else registers),
                   regex=value.get("regex", ""))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.stage:
            out["stage"] = self.stage
        if self.ptx:
            out["ptx"] = self.ptx
        if self.registers is not None:
            out["registers"] = self.registers
        if self.regex:
            out["regex"] = self.regex
        return out

    def describe(self, default_kind: str | None) -> str:
        """What is compared, in words."""
        stages = f"stage {self.stage}" if self.stage else (f"{default_kind} (the default)" if default_kind
                                                           else "the output code (the default)")
        if self.ptx:
            return f"the PTX of kernel {self.ptx}"
        if self.registers is not None:
            return f"the registers per thread of {f'kernel {self.registers}' if self.registers else 'every kernel'}" \
                   " (kernels.resources)"
        if self.regex:
            return f"the matches of /{self.regex}/ in {stages}"
        return stages


@dataclass(frozen=True)
class Entry:
    """One toolchain of a scan: its name, the version of the language's main package, its job."""

    toolchain: str
    version: str
    job: Job | None  # None: not started yet (waiting), or the job was deleted since
    waiting: bool = False  # its job starts when one of the client's earlier jobs ends


@dataclass(frozen=True)
class Change:
    """What differs between two consecutive toolchains: `stage_a` of job A against `stage_b` of job
    B (a stage only one of them has: the other None), or the jobs' outcomes (both None)."""

    before: Entry
    after: Entry
    what: str  # "changed", "added", "removed", "fails", "compiles"
    stage_a: str | None = None
    stage_b: str | None = None


@dataclass(frozen=True)
class Report:
    scan: Scan
    spec: StageSpec
    entries: list[Entry]
    changes: list[Change]
    status: str  # "running" until every job ended, then "done"
    compared: str  # what is compared, in words
    notes: list[str] = field(default_factory=list)


class Scans:
    def __init__(self, store: Store, admission: Admission):
        self.store = store
        self.admission = admission
        self.jobs = admission.jobs
        self._lock = threading.Lock()
        # (job id, what is compared) -> [(stage key, digest)]: a finished job's stages never change
        self._values: OrderedDict[tuple, list[tuple[str, str]]] = OrderedDict()
        # scan id -> its client: scans with a job not started yet (run_pump starts them as room frees)
        self._waiting: dict[str, str] = {}

    # --- starting one ---------------------------------------------------------------------------
    def start(self, payload: Any, client: str) -> tuple[Scan, list[tuple[Job, bool]]]:
        """The scan of POST /api/scan's body `{"language", "source", "options", "stage"}` and its jobs
        submitted now (each the known one where the store has it): those the client's cap lets in, the
        rest waiting for the client's earlier jobs to end (`advance`). Its id is derived from its
        requests and stage, so the same scan asked again is the same record (any job of it deleted
        since is made again). A Refused when not one of its jobs can start."""
        if not isinstance(payload, dict):
            raise RequestError("the body must be a JSON object with language, source, options and stage")
        spec = StageSpec.parse(payload.get("stage"))
        options = payload.get("options") or {}
        if isinstance(options, dict):  # the scan names each job's toolchain; parse says what else is wrong
            options = {k: v for k, v in options.items() if k != TOOLCHAIN_OPTION}
        base = self.jobs.parse({"language": payload.get("language"), "source": payload.get("source"),
                                "options": options})
        pipeline = registry.get(base.language)
        able, left_out = [], []
        for chain in toolchain_envs.installed(self.jobs.config.toolchains_dir):
            why = pipeline.toolchain_refusal(base.options, chain.versions)
            if why is None:
                able.append(chain)
            else:
                left_out.append({"toolchain": chain.name, "why": why})
        ordered = toolchain_envs.version_order(able, pipeline.toolchain_packages[0]) \
            if pipeline.toolchain_packages else able
        if not ordered:
            raise RequestError(f"no installed toolchain can run this {base.language} job: "
                               + "; ".join(f"{e['toolchain']}: {e['why']}" for e in left_out))
        requests = self._on_each(base, [chain.name for chain in ordered])
        digest = hashlib.sha256(json.dumps(["scan", spec.to_json(), [(chain.name, r.digest()) for chain, r
                                                                      in zip(ordered, requests)]]).encode()).hexdigest()
        scan_id = short_id(digest, 10)
        with self._lock:
            known = self.store.scan(scan_id)
            if known is None and client and sum(1 for c in self._waiting.values() if c == client) \
                    >= MAX_WAITING_SCANS_PER_CLIENT:
                raise Refused(ErrorKind.ClientQueueFull,
                              f"you have {MAX_WAITING_SCANS_PER_CLIENT} version scans waiting for your earlier jobs "
                              "already; start this one when one of them has started all its jobs", retry_after=60)
            jobs = [(chain.name, "") for chain in ordered] if known is None else list(known.jobs)
            try:
                submitted = self._submit_what_fits(requests, jobs, client, refuse_first=known is None)
            except Refused as refused:
                if refused.kind is not ErrorKind.ClientQueueFull:
                    raise
                raise Refused(refused.kind, f"a version scan makes one job per toolchain ({len(requests)}: "
                                            f"{', '.join(c.name for c in ordered)}) and starts those that fit "
                                            f"your jobs' cap, the rest as yours end; none fits now: "
                                            f"{refused.message}", retry_after=refused.retry_after) from None
            scan = Scan(id=scan_id, language=base.language, stage=spec.to_json(), jobs=jobs,
                        left_out=known.left_out if known else left_out, created=None,
                        client=known.client if known else client)
            self.store.create_scan(scan) if known is None else self.store.set_scan_jobs(scan_id, jobs)
            self._note_waiting(scan)
        return scan, [s for s in submitted if s is not None]

    def _on_each(self, request: Any, toolchains: list[str]) -> list:
        """`request` (its language, source and options) on each of `toolchains`: a scan's requests."""
        return [self.jobs.parse({"language": request.language, "source": request.source,
                                 "options": dict(request.options, **{TOOLCHAIN_OPTION: name})}) for name in toolchains]

    def _submit_what_fits(self, requests: list, jobs: list[tuple[str, str]], client: str,
                          refuse_first: bool) -> list[tuple[Job, bool] | None]:
        """Submit each request whose entry of `jobs` has no job yet (or one deleted since), in version
        order, as far as the client's cap lets it now; `jobs` is updated in place. A request the store
        answers already counts nothing and is answered whatever the cap. With `refuse_first`, a refusal
        (the client's cap, the queue, the storage quota, the rate) before any job of the scan exists is
        the scan's refusal, as a compile's would be: a scan waits only behind a job of its own, whose
        request it is made again from. Later, a refused entry waits and is tried again."""
        out: list[tuple[Job, bool] | None] = []
        for i, request in enumerate(requests):
            name, job_id = jobs[i]
            existing = self.store.get_job(job_id) if job_id else None
            if existing is not None:
                out.append((existing, True))
                continue
            try:
                (job, was_known), = self.admission.submit([request], client)
            except Refused:
                if refuse_first and not any(j for _, j in jobs):
                    raise
                jobs[i] = (name, "")
                out.append(None)
                continue
            jobs[i] = (name, job.id)
            out.append((job, was_known))
        return out

    def _note_waiting(self, scan: Scan) -> None:
        if any(not job_id for _, job_id in scan.jobs):
            self._waiting[scan.id] = scan.client
        else:
            self._waiting.pop(scan.id, None)

    def advance(self, scan_id: str) -> None:
        """Start the jobs of a waiting scan that the client's cap lets in now (its earlier jobs
        ended). Called by the pump and whenever the scan is read."""
        with self._lock:
            scan = self.store.scan(scan_id)
            if scan is None:
                self._waiting.pop(scan_id, None)
                return
            if all(job_id for _, job_id in scan.jobs):
                self._waiting.pop(scan_id, None)
                return
            first = next((self.store.get_job(j) for _, j in scan.jobs if j), None)
            if first is None:
                return
            requests = self._on_each(first.request, [name for name, _ in scan.jobs])
            jobs = list(scan.jobs)
            try:
                self._submit_what_fits(requests, jobs, scan.client, refuse_first=False)
            except (RequestError, Refused):  # a toolchain removed since, the service closing: it stays waiting
                return
            if jobs != scan.jobs:
                self.store.set_scan_jobs(scan_id, jobs)
            self._note_waiting(dataclasses.replace(scan, jobs=jobs))

    def run_pump(self, stop: threading.Event, every_s: float = PUMP_INTERVAL_S) -> None:
        """Advance every waiting scan each `every_s` seconds until `stop` is set (a thread of the
        service's own; a scan is also advanced whenever it is read)."""
        while not stop.wait(every_s):
            for scan_id in list(self._waiting):
                try:
                    self.advance(scan_id)
                except Exception:  # noqa: BLE001 - tried again at the next tick
                    log.exception("advancing version scan %s failed", scan_id)

    def again(self, scan_id: str, stage: Any, client: str) -> tuple[Scan, list[tuple[Job, bool]]] | None:
        """The same scan comparing another stage: a scan of the same requests, whose jobs the store
        has (nothing compiles again, and a known job counts nothing against the client's cap).
        None: no such scan, or none of its jobs is kept."""
        scan = self.store.scan(scan_id)
        jobs = (self.store.get_job(job_id) for _, job_id in (scan.jobs if scan else []))
        job = next((j for j in jobs if j is not None), None)
        if job is None:
            return None
        return self.start({"language": job.request.language, "source": job.request.source,
                           "options": job.request.options, "stage": stage}, client)

    # --- what it found ----------------------------------------------------------------------------
    def report(self, scan_id: str) -> Report | None:
        """The scan's jobs in version order with their status, and the changes between consecutive
        ones that both ended. Cheap to ask again while it runs: a finished job is read once."""
        scan = self.store.scan(scan_id)
        if scan is None:
            return None
        if any(not job_id for _, job_id in scan.jobs):
            self.advance(scan_id)
            scan = self.store.scan(scan_id) or scan
        spec = StageSpec.parse(scan.stage)
        main = (registry.get(scan.language).toolchain_packages or ("",))[0]
        entries = []
        for name, job_id in scan.jobs:
            job = self.store.get_job(job_id) if job_id else None
            version = (job.toolchain.get(main) if job else None) or name
            entries.append(Entry(name, version, job, waiting=not job_id))
        done = [e.job for e in entries if e.job is not None and e.job.status == "done"]
        default_kind = next((kind for kind in DEFAULT_STAGES
                             if any(_of_kind(s.key, kind) for job in done for s in job.stages)), None)
        notes: list[str] = []
        values = [self._value(e.job, spec, default_kind, notes) if e.job is not None and e.job.finished else None
                  for e in entries]
        changes = []
        for i in range(1, len(entries)):
            if values[i - 1] is not None and values[i] is not None:
                changes += changes_between(entries[i - 1], entries[i], values[i - 1], values[i])
        if done and not any(v for e, v in zip(entries, values) if e.job is not None and e.job.status == "done"):
            notes.append(f"no job has {spec.describe(default_kind)}: nothing was compared")
        finished = all(not e.waiting and (e.job is None or e.job.finished) for e in entries)
        return Report(scan=scan, spec=spec, entries=entries, changes=changes, status="done" if finished else "running",
                      compared=spec.describe(default_kind), notes=list(dict.fromkeys(notes)))

    def diff_url(self, change: Change) -> str:
        """The comparison of the change's two jobs (`/c/<id>`, made once: its id is derived from
        both requests), opened on the stages that changed."""
        comparison = self.jobs.comparison(change.before.job, change.after.job)
        pair = [f"{side}={quote(key, safe='')}" for side, key in (("a", change.stage_a), ("b", change.stage_b)) if key]
        return f"/c/{comparison}" + (f"#{'&'.join(pair)}&view=diff" if pair else "")

    def to_json(self, report: Report, base: str = "") -> dict[str, Any]:
        """GET /api/scans/<id>'s body (docs/api.md); links start with `base` (MCP's absolute ones)."""
        scan = report.scan
        jobs = []
        for entry in report.entries:
            job = entry.job
            row: dict[str, Any] = {"toolchain": entry.toolchain, "version": entry.version,
                                   "job": job.id if job else None,
                                   "status": job.status if job else ("waiting" if entry.waiting else "deleted"),
                                   "url": f"{base}/j/{job.id}" if job else None}
            if job is not None and job.error is not None:
                row["error"] = job.error.to_json()
            jobs.append(row)
        changes = []
        for c in report.changes:
            change = {"from": c.before.toolchain, "to": c.after.toolchain, "what": c.what,
                      "stage": c.stage_b or c.stage_a, "diff_url": base + self.diff_url(c)}
            if c.stage_a and c.stage_b and c.stage_a != c.stage_b:
                change["stage_from"] = c.stage_a
            changes.append(change)
        return {"scan": scan.id, "url": f"{base}/scan/{scan.id}", "language": scan.language, "stage": scan.stage,
                "compared": report.compared, "status": report.status, "jobs": jobs, "changes": changes,
                "left_out": scan.left_out, "notes": report.notes}

    def _value(self, job: Job, spec: StageSpec, default_kind: str | None,
               notes: list[str]) -> list[tuple[str, str]]:
        """What job `job` is compared by: [(stage key, digest of its normalised value)]; a failed
        job's is its failure."""
        if job.status == "failed":
            return [("", f"failed: {job.error.kind if job.error else 'unknown'}")]
        cache_key = (job.id, json.dumps(spec.to_json(), sort_keys=True), default_kind)
        with self._lock:
            if cache_key in self._values:
                self._values.move_to_end(cache_key)
                return self._values[cache_key]
        value, complete = [], True
        for key in _selected(job, spec, default_kind)[:MAX_STAGES]:
            found = self.store.stage_text(job.id, key)
            if found is None:
                continue
            text, note = _compared_text(spec, found[1])
            if note:
                notes.append(f"{job.id} {key}: {note}")
                complete = False
            value.append((key, hashlib.sha256(self._normalised(text, job).encode()).hexdigest()))
        if complete:
            with self._lock:
                self._values[cache_key] = value
                while len(self._values) > _CACHED_VALUES:
                    self._values.popitem(last=False)
        return value

    @staticmethod
    def _normalised(text: str, job: Job) -> str:
        """`text` without where its toolchain is installed: the runner shows the default's
        environment as <venv> and another's as <toolchains>/NAME, and a package's files by their
        import path (service/runner.py, scrub_paths); both environments become <toolchain>."""
        name = job.toolchain.get("toolchain")
        if name:
            text = text.replace(f"<toolchains>/{name}", "<toolchain>")
        return text.replace("<venv>", "<toolchain>")


def stage_choices(report: Report) -> dict[str, list[str]]:
    """What the scan page's stage picker offers, from the jobs that compiled: every kind of stage
    (a key's part before ':'), every stage key (at most MAX_STAGES), and every GPU kernel (its PTX)."""
    keys = list(dict.fromkeys(s.key for e in report.entries if e.job is not None and e.job.status == "done"
                              for s in e.job.stages))[:MAX_STAGES]
    kernels = (k.split(":", 1)[1] for k in keys if k.startswith(("triton.ptx:", "cute.ptx:")))
    return {"kinds": list(dict.fromkeys(k.split(":", 1)[0] for k in keys if ":" in k)), "keys": keys,
            "kernels": list(dict.fromkeys(kernels))}


def stage_from_form(form: Any) -> Any:
    """The stage spec of the scan page's picker: `registers` (a kernel, "*": every kernel), else
    `regex` (in `stage`, when one is picked), else `stage`; nothing: the default."""
    stage, pattern, registers = (str(form.get(name) or "") for name in ("stage", "regex", "registers"))
    if registers:
        return {"registers": True if registers == "*" else registers}
    if pattern:
        return {"regex": pattern, **({"stage": stage} if stage else {})}
    return stage or None


def _of_kind(key: str, kind: str) -> bool:
    return key == kind or key.startswith(kind + ":")


def _selected(job: Job, spec: StageSpec, default_kind: str | None) -> list[str]:
    """The keys of the stages of `job` that `spec` compares, in the job's order."""
    keys = [s.key for s in job.stages]
    if spec.registers is not None:
        return [k for k in keys if k == "kernels.resources"]
    if spec.ptx:
        return [k for k in keys if k.endswith(".ptx:" + spec.ptx)]
    kind = spec.stage or default_kind
    return [k for k in keys if kind and _of_kind(k, kind)]


def _compared_text(spec: StageSpec, text: str) -> tuple[str, str | None]:
    """The part of a stage's text `spec` compares, and a note when it could not be read whole."""
    if spec.registers is not None:
        try:
            rows = json.loads(text).get("kernels", [])
        except (ValueError, AttributeError):
            return text, "kernels.resources is not the resource table's JSON; compared as text"
        return "\n".join(f"{r.get('kernel')} {json.dumps(r.get('config'), sort_keys=True)} warps={r.get('num_warps')} "
                         f"stages={r.get('num_stages')}: {r.get('registers')} registers"
                         for r in rows if isinstance(r, dict) and spec.registers in ("", r.get("kernel"))), None
    if spec.regex:
        matches = []
        try:
            for m in regex.finditer(spec.regex, text, timeout=REGEX_TIMEOUT_S):
                groups = m.groups()
                matches.append(m.group(0) if not groups else "\t".join(g or "" for g in groups))
                if len(matches) >= MAX_MATCHES:
                    return "\n".join(matches), f"the first {MAX_MATCHES} matches were compared"
        except TimeoutError:
            return "\n".join(matches), (f"the regex took longer than {REGEX_TIMEOUT_S:g} s on this stage; the matches "
                                        "found by then were compared")
        return "\n".join(matches), None
    return text, None


def changes_between(a: Entry, b: Entry, va: list[tuple[str, str]], vb: list[tuple[str, str]]) -> list[Change]:
    """The changes from toolchain A to the next, B: a failure on one side only (or another
    failure), else each stage that differs, paired by key, then the rest in order."""
    failed_a, failed_b = a.job.status == "failed", b.job.status == "failed"
    if failed_a or failed_b:
        if failed_a and failed_b and va == vb:
            return []
        return [Change(a, b, "fails" if failed_b else "compiles")]
    digests_a, digests_b = dict(va), dict(vb)
    out = [Change(a, b, "changed", k, k) for k, _ in vb if k in digests_a and digests_a[k] != digests_b[k]]
    only_a = [k for k, _ in va if k not in digests_b]
    only_b = [k for k, _ in vb if k not in digests_a]
    for ka, kb in zip(only_a, only_b):
        if digests_a[ka] != digests_b[kb]:
            out.append(Change(a, b, "changed", ka, kb))
    out += [Change(a, b, "removed", k, None) for k in only_a[len(only_b):]]
    out += [Change(a, b, "added", None, k) for k in only_b[len(only_a):]]
    return out
