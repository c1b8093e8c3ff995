"""Every limit, default and toggle of irscope, in one table.

Each setting can be given as an environment variable IRSCOPE_<NAME upper-cased>, or in the
`config` mapping passed to create_app. docs/settings.md's table is generated from this
table (tests/test_settings.py fails when the two disagree).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from compiler import registry
from compiler.model import JobSettings


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str

    @property
    def env(self) -> str:
        return "IRSCOPE_" + self.name.upper()

    def parse(self, raw: Any) -> Any:
        if isinstance(self.default, bool):
            return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes", "on")
        if isinstance(self.default, int):
            return int(raw)
        if isinstance(self.default, float):
            return float(raw)
        return str(raw)


_JOB = JobSettings()


def _job(name: str, help: str) -> Setting:
    """A setting of every job's record (compiler/model.py JobSettings), its default taken from there."""
    return Setting(name, getattr(_JOB, name), help)


SETTINGS: tuple[Setting, ...] = (
    Setting("data_dir", "./var", "Where the database and the per-job scratch directories live."),
    Setting("database_url", "", "SQLAlchemy URL of the store; empty means SQLite at DATA_DIR/irscope.db."),
    Setting("languages", ",".join(registry.offered()),
            "Comma-separated languages this server offers (`fake` is the test pipeline)."),
    Setting("workers", 2, "Jobs run at the same time, each in its own sandboxed process."),
    Setting("sandbox", "bwrap", "`bwrap` runs every job under bubblewrap; `none` runs jobs unsandboxed "
                                "(only with `irscope serve --insecure-no-sandbox`)."),
    _job("wall_time_limit_s", "Wall-clock seconds a job may take before it is stopped."),
    _job("cpu_time_limit_s", "CPU seconds the worker process may use (RLIMIT_CPU)."),
    _job("memory_limit_mb", "Address space of each process in the sandbox, in MiB (RLIMIT_AS)."),
    _job("run_memory_percent", "A PyTorch job with `run: auto` compiles and runs its model when the peak the "
                               "run would hold (estimated on fake tensors with PyTorch's MemTracker: parameters, "
                               "inputs, activations, the outputs the timing keeps) takes at most this share of "
                               "memory_limit_mb (the rest: the interpreter, torch, the compile); above it, it "
                               "compiles only, on fake tensors. The accuracy check's float64 copy is left out when "
                               "only it does not fit. Where no estimate can be made, the inputs and parameters "
                               "must fit half this share."),
    _job("job_memory_mb", "Memory all processes of one job may use together, in MiB, its tmpfs files "
                                   "included (a memory cgroup; past it the kernel kills the job)."),
    _job("job_cpus", "CPU cores' worth of time a job may use at once (a cgroup CPU quota)."),
    _job("process_limit", "Processes and threads a job may have at once (a pids cgroup)."),
    _job("file_size_limit_mb", "Largest file a job may write, in MiB (RLIMIT_FSIZE)."),
    _job("tmp_size_mb", "Size of the job's private /tmp (a tmpfs), in MiB."),
    _job("shm_size_mb", "Size of the job's private /dev/shm (a tmpfs), in MiB."),
    _job("job_disk_mb", "Size of the job directory (/job, a tmpfs mounted per job), in MiB; also the most "
                                 "stage text one job may store. 0: a plain directory on the data disk, no cap."),
    Setting("sandbox_user", "irscope-sandbox", "Unprivileged host user (name, or uid:gid) every job runs as when "
                                               "the server runs as root; ./run.sh creates it."),
    _job("output_limit_kb", "Captured program output and worker log kept per job, in KiB."),
    _job("max_stage_kb", "Largest artifact kept per stage, in KiB; a larger one is cut at a line "
                                   "boundary and says so on its page."),
    _job("max_stages", "Most stages one job may list; a job that lists more is stopped."),
    _job("max_manifest_kb", "Largest manifest.json the runner reads from a job, in KiB."),
    _job("max_stage_meta_kb", "Largest metadata (JSON) one stage may carry, in KiB."),
    _job("max_svg_kb", "Largest drawing (an SVG stage) the runner sanitizes, once, to store it for drawing, in KiB; "
                       "a larger one is stored as text, not drawn."),
    Setting("max_source_kb", 256, "Largest source a request may carry, in KiB."),
    Setting("max_request_kb", 1024, "Largest HTTP request body the server accepts, in KiB (larger: 413)."),
    Setting("rate_limit", "30 per minute", "Compile requests one client (IP address) may make, as "
                                           "`N per second|minute|hour`; more get 429. Empty: no limit."),
    Setting("max_queued_jobs", 64, "Jobs that may wait for a free worker (a class of 30 pressing Compile at once "
                                   "fits); a compile request beyond that gets 429."),
    Setting("reuse_results", True, "Answer a request seen before (same source, options and toolchain) "
                                   "from the store instead of compiling again. This tells a client whether "
                                   "anyone compiled exactly this source before (docs/security.md)."),
    Setting("toolchains_dir", "", "Where the toolchains `irscope toolchains add NAME` installs live, one environment "
                                  "each (`<dir>/NAME`), shared by every data directory on the machine; empty: "
                                  "`toolchains/` beside the project's `.venv` (docs/toolchains.md)."),
    Setting("warm_toolchain_cache", True, "At start-up, build the toolchain cache later jobs are seeded with "
                                          "(Inductor's CPU ISA probes and the precompiled header of its kernels' "
                                          "prelude; the kernel languages' virtual CUDA device, one for all of "
                                          "them) in a trusted warm-up (never user code): the first spare "
                                          "template's where there is one (the jobs that waited for it fork from "
                                          "it), else a warm-up job of the pipeline's own source; kept per "
                                          "toolchain version and host (CPU flags, C++ compiler)."),
    Setting("spare_workers", 2, "Sandboxed job processes kept started per language, each waiting for exactly one "
                                "job with its compiler imported and warmed up on irscope's own code (PyTorch: a "
                                "compile, then a reset; nothing of it reaches the job; as many again for jobs on "
                                "the virtual cuda:sm_90, which install that device before their warm-up; HLO, "
                                "StableHLO and JAX: XLA's child process with jax imported, given the job's device "
                                "count when the job arrives); a taken "
                                "one is replaced at once, so back-to-back jobs find one ready. One spare of any "
                                "language warms up at a time, the languages in the order of `languages` (0: start "
                                "every job's process on demand)."),
    Setting("spare_template_slots", 32, "With bubblewrap, on a machine without a GPU device node (a GPU driver does "
                                        "not survive a fork once a warm-up initialised it), a language whose pipeline "
                                        "allows it (PyTorch) keeps spare templates instead of spares: one sandboxed "
                                        "process, warmed up as a spare is, that forks a fresh job process for each of "
                                        "this many jobs, each of which makes a sandbox of its own before its job runs "
                                        "(namespaces, mounts, cgroup, rlimits, seccomp); a job then costs a fork, not "
                                        "a warm-up. `spare_workers` then counts the slots left; the next template "
                                        "starts when fewer are. 0: spares are processes started one per job."),
    Setting("spare_memory_mb", 4096, "The most resident memory all spares together may hold, in MiB (each one's is "
                                     "read from its cgroup; no more spares start past it). 0: no bound."),
    _job("measure_s", "Seconds a job spends timing each of eager and compiled calls (after a few warm-up "
                              "calls, and after every stage is written); the Timings tab gives the repeat count "
                              "and the spread."),
    Setting("imports", True, "Accept compiler logs made elsewhere (a TORCH_TRACE directory, a TritonParse trace, "
                             "an XLA dump) uploaded at /import or POST /api/imports, unpacked and read in the "
                             "sandbox."),
    Setting("import_max_upload_mb", 64, "Largest archive one may upload to import, in MiB (larger: 413)."),
    _job("import_max_unpacked_mb", "Most bytes an uploaded archive may unpack to, in MiB, counted as they "
                                           "are written (past it the import is refused as a possible "
                                           "decompression bomb)."),
    _job("import_max_files", "Most files and directories an uploaded archive may hold."),
    _job("pass_dump_mb", "Triton's per-pass IR dumps (the MLIR passes of each kernel) one job process keeps, in "
                         "MiB, within job_disk_mb: past it, later kernels compile without them and their "
                         "metadata says so."),
    _job("program_modules", "Most of a JAX program's own jitted modules one job compiles with every stage (each "
                            "dumps every XLA pass); the rest are listed as not compiled, naming this setting."),
    Setting("keep_job_dirs", False, "Keep each job's scratch directory after it ends (for debugging)."),
    Setting("examples_dir", "", "Directory of the examples gallery's lessons (one `<slug>/lesson.toml` each); "
                                "empty: the repository's `examples/`."),
    Setting("trusted_hosts", "localhost,127.0.0.1", "Host names (comma-separated) this server answers to; a "
                                                    "request naming another Host gets 400 (no DNS rebinding). "
                                                    "`irscope serve --host H` adds H; `*`: any."),
    Setting("trusted_proxies", 0, "Reverse proxies in front of the server: with N, the client address (rate "
                                  "limit, per-client caps) is the one the N proxies saw (X-Forwarded-For, read by "
                                  "Werkzeug's ProxyFix), and the scheme and host theirs. 0: the peer address."),
    Setting("embed_frame_ancestors", "*", "Who may show `?embed=1` pages in a frame (slides): a CSP "
                                          "frame-ancestors source list; `'none'` forbids it. Other pages are "
                                          "never framed."),
    Setting("max_diff_lines", 20000, "Longest text (either side) a page diffs, in lines; a longer one is refused "
                                     "with a sentence (diff cost grows with the square of the lines)."),
    Setting("max_diff_kb", 2048, "Largest text (either side) a page diffs, in KiB."),
    Setting("diff_timeout_s", 5.0, "Seconds a diff may take, computed in a process of its own; past it, it is "
                                   "stopped and the page says so."),
    Setting("diff_processes", 2, "Diffs computed at once (each in its own process); more wait a moment, then "
                                 "are refused."),
    Setting("mcp", True, "Serve the MCP endpoint at `/mcp` (streamable HTTP, docs/agents.md): irscope's tools for "
                         "agents, behind the same admission as the API. `irscope mcp` (stdio) works either way."),
    Setting("mcp_compile_wait_s", 30.0, "Seconds an MCP `compile` (or `job_status`) call waits for its job to end "
                                        "before it answers with the job's id to ask again; an HTTP MCP request is "
                                        "given up 60 s after this."),
    Setting("mcp_max_waits", 4, "MCP calls (`compile`, `job_status`) that may wait for a job at once in one web "
                                "process: each holds a web thread while it waits, so keep it below web_threads; "
                                "one more is refused with retry_after_s (a compile is then answered at once)."),
    Setting("mcp_max_waits_per_client", 2, "MCP calls one client (IP address) may have waiting for jobs at once; "
                                           "one more is refused as for mcp_max_waits."),
    Setting("mcp_max_result_kb", 64, "Largest text one MCP tool result carries, in KiB; a longer stage or diff is "
                                     "cut at a line, and the result says so and how to ask for the rest."),
    Setting("poll_interval_ms", 700, "How often the page asks for a running job's progress."),
    Setting("web_threads", 8, "Threads of the web server (gunicorn's gthread worker) answering requests at once."),
    Setting("web_processes", 0, "Web server (gunicorn) processes. 0: 1 in the embedded mode (its store and worker "
                                "pool live in the one process; it needs exactly 1), 2 per CPU core (at most 8) when "
                                "`broker_url` is set."),
    Setting("max_jobs_per_client", 4, "Jobs one client (IP address) may have waiting or running at once; one more "
                                      "gets 429, so one client's burst cannot starve another's job. 0: no cap."),
    Setting("client_store_mb", 2048, "What one client's jobs and uploads may keep in the store, in MiB (as stored, "
                                     "compressed); past it the client gets no new job until its old ones are "
                                     "collected. 0: no quota."),
    Setting("store_max_mb", 20480, "The store's cap, in MiB: the collection deletes the least recently viewed jobs "
                                   "nobody points at (no permalink, no comparison) to stay under it; with nothing "
                                   "left to delete, new jobs are refused. 0: no cap."),
    Setting("keep_jobs_days", 30.0, "A job nobody points at and nobody viewed for this many days is deleted by "
                                    "the collection, with the uploads only it read. 0: kept until the cap needs "
                                    "the room."),
    Setting("min_free_disk_mb", 1024, "Free space the data directory's disk keeps: below it, new jobs and uploads "
                                      "are refused (nothing stored is lost)."),
    Setting("gc_interval_s", 600.0, "Seconds between the server's collections of old jobs (`irscope gc` runs one "
                                    "at once). 0: only `irscope gc`."),
    Setting("stage_chunk_kb", 256, "Stage text is stored compressed in chunks of about this many KiB, cut at line "
                                   "boundaries, so one page of a large stage is read without the rest."),
    Setting("stage_page_lines", 5000, "Lines of a code stage shown per page; a longer stage gets a pager (its raw "
                                      "text has every line)."),
    Setting("broker_url", "", "Celery broker of the worker tier (Redis, e.g. `redis://host:6379/0`). Set: `irscope "
                              "serve` enqueues every job for `irscope worker` processes instead of running it, and "
                              "the store must be shared (`database_url`, PostgreSQL). Empty: the embedded mode."),
    Setting("worker_queues", "", "Queues an `irscope worker` takes jobs from, comma-separated (`cpu`, `cuda:sm_90`, "
                                 "`hip:gfx942`, ...); empty: `cpu` plus one queue per GPU the worker detects."),
    Setting("worker_name", "", "Name of an `irscope worker` (unique per host; its job directories live under "
                               "DATA_DIR/workers/NAME); empty: `irscope@<hostname>`."),
    Setting("worker_heartbeat_s", 5.0, "Seconds between a worker's heartbeats in the store (its queues, devices, "
                                       "running jobs); each heartbeat also looks for jobs of dead workers."),
    Setting("worker_lost_after_s", 30.0, "A worker whose last heartbeat is older than this is dead: its running "
                                         "jobs go back to their queue (or fail, see job_attempts), and routing no "
                                         "longer counts it."),
    Setting("job_attempts", 2, "Times a job may be taken by a worker; a job whose worker died that many times is "
                               "failed with a sentence saying so instead of being retried again (a poison job)."),
)

BY_NAME = {s.name: s for s in SETTINGS}


def load(overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Resolve every setting: overrides, then the environment, then the default."""
    environ = os.environ if environ is None else environ
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(BY_NAME))
    if unknown:
        raise KeyError(f"unknown setting {unknown[0]!r}")
    values = {}
    for s in SETTINGS:
        if s.name in overrides:
            values[s.name] = s.parse(overrides[s.name])
        elif s.env in environ:
            values[s.name] = s.parse(environ[s.env])
        else:
            values[s.name] = s.default
    values["data_dir"] = os.path.abspath(values["data_dir"])
    if not values["database_url"]:
        values["database_url"] = "sqlite:///" + os.path.join(values["data_dir"], "irscope.db")
    return values


def markdown_table() -> str:
    """The settings as docs/settings.md shows them."""
    rows = ["| setting | environment variable | default | what it does |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        default = str(s.default).lower() if isinstance(s.default, bool) else (s.default if s.default != "" else '""')
        rows.append(f"| `{s.name}` | `{s.env}` | `{default}` | {s.help} |")
    return "\n".join(rows)
