"""Turning a request into a job: validate, canonicalise, key, look up the store, enqueue.

The service's own callers use `submit`; requests from outside come through service/admission.py,
which plans them here, checks the caps and the client's rate, then creates them. It never imports
a compiler (only the registry, for option schemas).
"""
from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Callable

from compiler import registry
from compiler.errors import REUSED_KINDS, ErrorKind, Refused
from compiler.model import Request
from compiler.pipeline import OptionError, chosen_toolchain
from service import routing, toolchain_envs
from service.runner import Runner
from service.store import Job, Store
from service.toolchain import toolchain

_ALPHABET = "23456789abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ"  # no 0/O, 1/l/I


class RequestError(Refused):
    """A request that cannot become a job (bad JSON shape, unknown language or option)."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.RequestError, message)


@dataclass(frozen=True)
class Planned:
    """A request on its way to becoming a job: where it runs, its cache key, and the job that
    answers it already (a stored result or the same request in flight), if one does."""

    request: Request
    key: str
    queue: str
    placement: dict[str, Any]
    toolchain: dict[str, str]
    known: Job | None
    upload_digest: str = ""  # a request made from an upload: the upload's sha256


@dataclass(frozen=True)
class JobsConfig:
    languages: tuple[str, ...]
    max_source_bytes: int
    reuse_results: bool = True
    max_queued_jobs: int = 0  # jobs that may wait for a worker; 0: no cap
    imports: bool = False  # accept uploads for the `import` language (setting imports)
    max_jobs_per_client: int = 0  # jobs one client may have waiting or running; 0: no cap
    toolchains_dir: str = ""  # the installed toolchains (service/toolchain_envs.py); "": the default place


def short_id(digest_hex: str, length: int) -> str:
    number = int(digest_hex, 16)
    chars = []
    for _ in range(length):
        number, rest = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[rest])
    return "".join(chars)


class Jobs:
    def __init__(self, store: Store, runner: Runner, config: JobsConfig,
                 live_queues: Callable[[], dict[str, bool]] | None = None):
        """`live_queues` (the worker tier's queues that live workers serve) routes each job to a
        queue; None is the embedded mode, where every job runs on this machine as requested."""
        self.store = store
        self.runner = runner
        self.config = config
        self.live_queues = live_queues
        self._creating = threading.Lock()

    def parse(self, payload: Any) -> Request:
        """A validated Request (options normalised) from the JSON body of POST /api/compile."""
        if not isinstance(payload, dict):
            raise RequestError("the body must be a JSON object with language, source and options")
        language = payload.get("language")
        source = payload.get("source")
        options = payload.get("options") or {}
        if language not in self.config.languages:
            raise RequestError(f"unknown language {language!r}; this server compiles: "
                               f"{', '.join(self.config.languages)}")
        if not isinstance(source, str):
            raise RequestError("source must be a string")
        if len(source.encode("utf-8")) > self.config.max_source_bytes:
            raise RequestError(f"source is {len(source.encode('utf-8'))} bytes; the limit is "
                               f"{self.config.max_source_bytes} (setting max_source_kb)")
        if not isinstance(options, dict):
            raise RequestError("options must be a JSON object")
        if registry.get(language).made_by_upload:
            raise RequestError(f"{language} jobs are made by uploading a file (POST /api/imports, or the form at "
                               "/import), not from a source")
        try:
            normalised = registry.get(language).normalise_options(options)
        except OptionError as e:
            raise RequestError(str(e)) from None
        self.chosen_toolchain(language, normalised)
        return Request(language=language, source=source.replace("\r\n", "\n"), options=normalised)

    def chosen_toolchain(self, language: str, options: dict[str, Any]) -> toolchain_envs.Toolchain:
        """The installed toolchain normalised `options` name, when it can run such a job; else a
        RequestError saying what it lacks and which installed toolchains have it."""
        name = chosen_toolchain(options)
        installed = toolchain_envs.installed(self.config.toolchains_dir)
        chain = next((c for c in installed if c.name == name), None)
        if chain is None:
            raise RequestError(f"no toolchain {name!r} is installed on this server; installed: "
                               f"{', '.join(c.name for c in installed)} (GET /api/toolchains; an administrator "
                               f"adds one with `irscope toolchains add NAME`)")
        pipeline = registry.get(language)
        why = pipeline.toolchain_refusal(options, chain.versions)
        if why is not None:
            able = [c.name for c in installed if pipeline.toolchain_refusal(options, c.versions) is None]
            raise RequestError(f"toolchain {name!r} cannot run this {language} job: {why}. Installed toolchains "
                               f"that can: {', '.join(able) or 'none'}")
        return chain

    def plan(self, request: Request) -> Planned:
        """Where `request` runs, its cache key, and the job answering it already, if one does."""
        chain = toolchain_envs.find(chosen_toolchain(request.options), self.config.toolchains_dir)
        if chain is None:  # a stored request whose toolchain was removed since
            raise RequestError(f"no toolchain {chosen_toolchain(request.options)!r} is installed on this server; "
                               f"installed: {toolchain_envs.names(self.config.toolchains_dir)}")
        placement: dict[str, Any] = {}
        queue = routing.CPU_QUEUE
        if self.live_queues is not None:
            target_option = next((o for o in registry.get(request.language).options if o.name == "target"), None)
            request, where = routing.place(request, self.live_queues(),
                                           target_option.choices if target_option else ())
            placement, queue = where.to_json(), where.queue
        tools = toolchain(request.language, chain, request.options)  # of the request as it will be compiled
        key = request.cache_key(tools, {"target": placement["target"], "virtual": placement["virtual"]}
                                if placement.get("target") else None)
        known = self.store.find_reusable(key, REUSED_KINDS) if self.config.reuse_results else None
        return Planned(request, key, queue, placement, tools, known)

    def check_capacity(self, client: str, new_jobs: int = 1) -> None:
        """Raise Refused(ClientQueueFull) when `client` may not have `new_jobs` more jobs waiting or
        running, or Refused(QueueFull) when the queue may not take them."""
        if client and self.config.max_jobs_per_client > 0:
            mine = self.store.client_jobs(client)
            if mine + new_jobs > self.config.max_jobs_per_client:
                asked = f" and asked for {new_jobs} more" if new_jobs > 1 else ""
                raise Refused(ErrorKind.ClientQueueFull,
                              f"you have {mine} jobs waiting or running already{asked}; one client may have "
                              f"{self.config.max_jobs_per_client} at once (setting max_jobs_per_client), so that "
                              "everyone's jobs get their turn. Submit this when one of yours has finished",
                              retry_after=60)
        if self.config.max_queued_jobs > 0:
            waiting = self.store.queued_count()
            if waiting + new_jobs > self.config.max_queued_jobs:
                raise Refused(ErrorKind.QueueFull,
                              f"the server is busy: {waiting} jobs are already waiting for a worker (setting "
                              "max_queued_jobs); try again in a minute", retry_after=60)

    def create(self, planned: Planned, client: str = "") -> tuple[Job, bool]:
        """The job for a planned request (the known one, if one answers it already), and whether
        it was known. Creating does not check the caps: Admission does, before. The store is asked
        again under this process's lock, so that a class pressing Compile on the same example at
        the same moment makes one job, not thirty."""
        if planned.known is not None:
            return planned.known, True
        with self._creating:
            known = self.store.find_reusable(planned.key, REUSED_KINDS) if self.config.reuse_results else None
            if known is not None:
                return known, True
            job = self.store.create_job(secrets.token_hex(6), planned.key, planned.request, planned.toolchain,
                                        client=client, queue=planned.queue, placement=planned.placement)
        self.runner.submit(job)
        return job, False

    def submit(self, request: Request, client: str = "") -> tuple[Job, bool]:
        """For irscope's own callers (tests, the CLI): plan, check the caps, create. Requests from
        outside go through Admission, which also counts the client's rate."""
        planned = self.plan(request)
        if planned.known is None:
            self.check_capacity(client)
        return self.create(planned, client)

    def plan_upload(self, language: str, name: str, data: bytes, options: dict[str, Any]) -> Planned:
        """The plan of a job made from an upload (Pipeline.made_by_upload): the request describes
        the file by its sha256 (Admission stores the file once the job is admitted), and the same
        file with the same options is answered from the store like any repeated request."""
        pipeline = registry.get(language)
        if not self.config.imports or not pipeline.made_by_upload:
            raise RequestError(f"this server makes no {language!r} jobs from uploads (setting imports)")
        try:
            normalised = pipeline.normalise_options(options)
        except OptionError as e:
            raise RequestError(str(e)) from None
        digest = hashlib.sha256(data).hexdigest()
        request = Request(language=language, source=pipeline.describe_upload(name, digest, len(data)),
                          options=normalised)
        return dataclasses.replace(self.plan(request), upload_digest=digest)

    def resume_unfinished(self) -> int:
        """Re-enqueue jobs a previous server process left queued or running."""
        ids = self.store.unfinished_jobs()
        for job_id in ids:
            job = self.store.get_job(job_id)
            if job is not None:
                self.runner.submit(job)
        return len(ids)

    def shortlink(self, job: Job, length: int = 8) -> str:
        """The permalink id for a job: derived from its request, so the same source and options
        always give the same link; the first job stored under an id stays its answer."""
        link_id = short_id(job.request.digest(), length)
        return self.store.create_shortlink(link_id, job.id)

    def comparison(self, a: Job, b: Job, length: int = 8) -> str:
        """The id of a comparison of two jobs (/c/<id>): derived from both requests in order, so
        the same pair always gives the same id; the first jobs stored under it stay its answer."""
        digest = hashlib.sha256(f"compare:{a.request.digest()}:{b.request.digest()}".encode()).hexdigest()
        return self.store.create_comparison(short_id(digest, length), a.id, b.id)
