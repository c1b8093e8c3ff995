"""Shared fixtures: an app with a temporary data directory per test, its client, and a helper that
waits for a job to finish. Jobs run through the real runner and sandbox."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pytest

from app import create_app
from compiler import python_ast, registry

# The session's background compiles parse on their threads while pytest rewrites each test module's
# asserts and the tests read sources with ast.parse: one lock for all of them (compiler/python_ast.py).
python_ast.guard_every_parse()

# The browser tests' fixtures (one Chromium, a real server per module, the watched page).
pytest_plugins = ["tests.browser"]

try:
    import torch
    HAS_CUDA = torch.cuda.is_available()
except Exception:  # noqa: BLE001 - collecting tests must not need torch
    HAS_CUDA = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (bench/gpu_check.py runs these on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
    # The modules that read the lesson store run last: its compile (started when collection ends,
    # pytest_collection_finish) then runs beside every other module instead of being waited for.
    last = {item.module.__name__ for item in items if "lesson_jobs" in item.fixturenames}
    items[:] = ([item for item in items if item.module.__name__ not in last] +
                [item for item in items if item.module.__name__ in last])




def make_app(tmp_path, **overrides):
    config = {"data_dir": str(tmp_path / "var"), "languages": "fake,pytorch", "workers": 2,
              "wall_time_limit_s": 240, "warm_toolchain_cache": False,
              "spare_workers": 0,
              # test modules submit their compiles at once from one address; the per-client cap
              # has its own test (tests/test_store.py)
              "max_jobs_per_client": 0}
    config.update(overrides)
    # werkzeug compiles each URL rule with ast.parse, which is not thread-safe (compiler/python_ast.py),
    # and the session's compile makes its app and reads its pages in a thread
    with python_ast.LOCK:
        return create_app(config)


@pytest.fixture
def app(tmp_path):
    flask_app = make_app(tmp_path)
    yield flask_app
    flask_app.extensions["irscope"].runner.shutdown()


@pytest.fixture
def client(app):
    return app.test_client()


def wait_spares_ready(spares, *keys: str, timeout: float = 600) -> None:
    """Wait, bounded, until a spare of each key is ready (a spare's or template's import and
    warm-up); one that is not by then fails with the spares' report."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(spares.ready(key) for key in keys):
        time.sleep(0.2)
    assert all(spares.ready(key) for key in keys), spares.report()


def wait_job(client, job_id: str, timeout: float = 300) -> dict:
    """Poll GET /api/jobs/<id> until the job is done or failed; return its JSON."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/jobs/{job_id}").get_json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def compile_and_wait(client, language: str, source: str, options: dict | None = None, timeout: float = 300) -> dict:
    response = client.post("/api/compile", json={"language": language, "source": source, "options": options or {}})
    assert response.status_code in (200, 202), response.get_json()
    return wait_job(client, response.get_json()["job"], timeout)


def glance_of_bundle(db_dir, language: str, stages: list, text_of: Callable[[str], str]) -> list:
    """The at-a-glance summary (service/glance.py) of a finished job holding `stages` (Stage records
    of a result bundle, `text_of(key)` their texts), stored as the runner stores them."""
    from compiler.model import Request
    from service.glance import glance
    from service.store import Store
    store = Store(f"sqlite:///{db_dir}/glance.db")
    store.create_job("j", "k", Request(language, "", {}), {})
    for position, stage in enumerate(stages):
        store.add_stage("j", position, stage, text_of(stage.key))
    store.finish_job("j", None, {})
    return [item.to_json() for item in glance(store, store.get_job("j"))]


def stage_text(client, job_id: str, key: str) -> str:
    from urllib.parse import quote
    response = client.get(f"/api/jobs/{job_id}/stages/{quote(key, safe='')}")
    assert response.status_code == 200, (key, response.get_data(as_text=True)[:300])
    return response.get_data(as_text=True)


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@dataclass
class FirstJob:
    """A server's first job, submitted the moment the server started on a fresh data directory
    (its toolchain warm-up running): the job's JSON once done, and every progress it showed."""

    job: dict
    progress: list


def _first_job_after_start(data: Path) -> tuple[str, FirstJob]:
    """Inductor's CPU ISA probes and precompiled header, built once per session by the real warm-up
    in the real sandbox, as a server with its default spares builds them at start-up (the first
    spare template's warm-up: service/toolchain_cache.py): an app starts on a fresh data directory
    and a job is submitted at once, as a user pressing Compile on a just-started server does.
    Returns the cache's directory and that first job."""
    app = make_app(data, languages="pytorch", warm_toolchain_cache=True, workers=1, spare_workers=1)
    client = app.test_client()
    response = client.post("/api/compile", json={"language": "pytorch", "source": FIRST_JOB})
    assert response.status_code == 202, response.get_json()
    job_id, progress = response.get_json()["job"], []
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        body = client.get(f"/api/jobs/{job_id}").get_json()
        if body.get("progress") and body["progress"] not in progress:
            progress.append(body["progress"])
        if body["status"] in ("done", "failed"):
            break
        time.sleep(0.1)
    runner = app.extensions["irscope"].runner
    from service import job_process
    from service.toolchain import toolchain
    cache = job_process.toolchain_cache_dir(runner.config, "pytorch", toolchain("pytorch"))
    runner.shutdown()
    assert os.path.isdir(cache), "the toolchain warm-up built no cache"
    return cache, FirstJob(body, progress)


@pytest.fixture(scope="session")
def first_job_after_start(request) -> tuple[str, FirstJob]:
    """The session's first job and the toolchain cache its server's warm-up built
    (_first_job_after_start), started when collection ended (pytest_collection_finish)."""
    return _session_compile(request.config).first_job()

FIRST_JOB = "import torch\n\n\ndef model(x):\n    return torch.cos(x) + 1\n\n\nexample_inputs = (torch.randn(32),)\n"


@pytest.fixture(scope="session")
def pytorch_toolchain_cache(first_job_after_start) -> str:
    """The session's toolchain cache (first_job_after_start built it). Apps that should start warm
    get a copy (seed_toolchain_cache); apps that should start cold simply do not."""
    return first_job_after_start[0]


@pytest.fixture(scope="session")
def torch_2_14_toolchain_cache(tmp_path_factory) -> str:
    """torch-2.14.1's toolchain cache, built once per session as a server builds another toolchain's
    on its first job (WarmUps.build_other: that toolchain's warm-up job in its own interpreter), for
    the modules that compile on torch-2.14.1 to seed (seed_toolchain_cache)."""
    from service import job_process, toolchain_envs
    from service.toolchain import toolchain
    chain = toolchain_envs.find("torch-2.14.1")
    if chain is None:
        pytest.fail(f"toolchain torch-2.14.1 is not installed in {toolchain_envs.root()}: `./run.sh setup` installs it")
    app = make_app(tmp_path_factory.mktemp("torch-2.14.1-warm-up"), languages="pytorch", workers=1)
    runner = app.extensions["irscope"].runner
    said = []
    try:
        runner.warm_ups.build_other("pytorch", chain, said.append)
        cache = job_process.toolchain_cache_dir(runner.config, "pytorch", toolchain("pytorch", chain))
    finally:
        runner.shutdown()
    assert said and said[0].startswith("warming up: the first torch-2.14.1 job builds its toolchain cache"), said
    from compiler.pytorch import toolchain_cache
    built = toolchain_cache.exported(cache) if os.path.isdir(cache) else {}
    # torch 2.14's probes leave a `.load_ok` marker beside each library: they are probes all the same.
    # How many depends on the host's ISA (3 on an AVX-512 host, 1 on this AMD EPYC without it): at least one
    assert built.get("isa_probes", 0) >= 1 and built.get("precompiled_headers") == 1, \
        f"the torch-2.14.1 warm-up built {built}"
    return cache


def seed_toolchain_cache(cache: str, data_dir: str) -> str:
    """Copy a built toolchain cache into a data directory, where a runner looks for it."""
    dest = os.path.join(data_dir, "toolchain", os.path.basename(cache))
    shutil.copytree(cache, dest)
    return dest


def seed_kernel_toolchain_cache(data_dir: str) -> str:
    """The kernel languages' shared toolchain cache (the virtual CUDA device's library, built once
    per session: testbed.bundle_jobs.shared_toolchain_cache) copied where a runner on `data_dir`
    looks for it, so that their jobs on a virtual CUDA target start warm."""
    import types

    from service import job_process
    from service.toolchain import toolchain
    from testbed.bundle_jobs import shared_toolchain_cache
    os.environ.setdefault("IRSCOPE_TEST_TOOLCHAIN_CACHE", _session_dir("irscope-test-toolchain-"))
    dest = job_process.toolchain_cache_dir(types.SimpleNamespace(data_dir=data_dir), "triton", toolchain("triton"))
    if not os.path.isdir(dest):
        shutil.copytree(shared_toolchain_cache("triton"), dest)
    return dest


# --- compiles that run in a child process of their own --------------------------------------------

@dataclass
class Background:
    """A child process compiling for a module fixture, its output in `base` (child.log: its output)."""

    proc: subprocess.Popen
    base: str

    def finish(self, timeout: float = 900) -> str:
        self.proc.wait(timeout=timeout)
        with open(os.path.join(self.base, "child.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
        assert self.proc.returncode == 0, log[-4000:]
        return self.base


def start_child(argv: list[str], base: str) -> Background:
    with open(os.path.join(base, "child.log"), "w") as log:
        return Background(subprocess.Popen(argv, cwd=base, stdout=log, stderr=subprocess.STDOUT), base)


@dataclass
class Children:
    """Child processes compiling side by side for a module fixture, each in base/<name> (its
    child.log: its output); the module's compiles need one process each (a process-wide state)."""

    procs: dict[str, subprocess.Popen]
    base: str
    timeout_s: float = 900

    def finish(self) -> str:
        for name, proc in self.procs.items():
            proc.wait(timeout=self.timeout_s)
            with open(os.path.join(self.base, name, "child.log"), encoding="utf-8", errors="replace") as f:
                log = f.read()
            assert proc.returncode == 0, (name, log[-4000:])
        return self.base


def start_children(script: str, names: Iterable[str], base: str, timeout_s: float = 900) -> Children:
    """`python script base/<name> <name>` for each name, all at once; each may take `timeout_s`."""
    procs = {}
    for name in names:
        out = os.path.join(base, name)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "child.log"), "w") as log:
            procs[name] = subprocess.Popen([sys.executable, script, out, name], cwd=out, stdout=log,
                                           stderr=subprocess.STDOUT)
    return Children(procs, base, timeout_s)


def pytest_collection_finish(session):
    """Start each selected module's `start_in_background(base)` as soon as collection ends: those
    compiles use one core each, so they overlap with the sandboxed jobs of the modules before them
    instead of waiting for their turn. The module fixture then only waits (take_background). The
    children are kept on the config: test modules import this file again as tests.conftest.
    The session's own compiles (the first job after a start, which builds the toolchain cache, then
    every lesson) start now too, in a thread (SessionCompile), and so does each module's
    `start_with_toolchain_cache(base, cache)` that a selected test waits for (`after_toolchain_cache`),
    in a thread of its own once that cache is built."""
    session.config.irscope_background = {}
    if session.config.option.collectonly:
        return
    # the kernel languages' shared toolchain cache, for this session's jobs run outside a server
    # (testbed.bundle_jobs.shared_toolchain_cache) and its apps (seed_kernel_toolchain_cache)
    os.environ.setdefault("IRSCOPE_TEST_TOOLCHAIN_CACHE", _session_dir("irscope-test-toolchain-"))
    modules = {item.module for item in session.items}
    used = set().union(*(item.fixturenames for item in session.items)) if session.items else set()
    if ({"lesson_jobs", "first_job_after_start", "pytorch_toolchain_cache"} & used or
            any(hasattr(module, "start_with_toolchain_cache") for module in modules)):
        _session_compile(session.config).start(lessons="lesson_jobs" in used)
    waiting = {item.module for item in session.items if "after_toolchain_cache" in item.fixturenames}
    for module in modules:
        for name, key, start_it in (
                ("start_in_background", module.__name__, lambda start, base: start(base)),
                ("start_with_toolchain_cache", module.__name__ + "@toolchain_cache",
                 lambda start, base: AfterToolchainCache(_session_compile(session.config), start, base))):
            start = getattr(module, name, None)
            if start is not None and (name == "start_in_background" or module in waiting):
                base = tempfile.mkdtemp(prefix="irscope-test-")
                session.config.add_cleanup(lambda base=base: shutil.rmtree(base, ignore_errors=True))
                session.config.irscope_background[key] = job = start_it(start, base)
                if isinstance(job, AfterToolchainCache):  # (a session stopped early still ends it)
                    session.config.add_cleanup(job.thread.join)


def take_background(request, start: Callable[[str], Background], tmp_path_factory) -> str:
    """The finished output directory of the requesting module's background compile (started now
    if it was not)."""
    started = getattr(request.config, "irscope_background", {})
    job = started.pop(request.module.__name__, None) or start(str(tmp_path_factory.mktemp("background")))
    return job.finish()


# --- the examples gallery's lessons, compiled once per session -------------------------------------

ALL_LANGUAGES = ",".join(registry.offered())


@dataclass
class LessonJobs:
    """Every lesson of examples/ (and its compare variant) compiled by one app in the real sandbox.
    `ids[(slug, "a" | "b")]` is the job; the app stays up for the session (its client answers the
    gallery, permalink and comparison routes), and `data_dir` is its store, which a server started
    on the same directory answers every lesson from."""

    app: object
    data_dir: str
    ids: dict

    @property
    def client(self):
        return self.app.test_client()

    @property
    def store(self):
        return self.app.extensions["irscope"].store


def _lesson_jobs(cache: str) -> LessonJobs:
    """Every lesson submitted to one app at once, each job waited for."""
    from app import lessons
    # IRSCOPE_TEST_LESSON_STORE: a directory kept between runs (while writing a lesson or a page
    # test): its store answers every lesson compiled there before, and only new ones compile.
    kept = os.environ.get("IRSCOPE_TEST_LESSON_STORE")
    base = Path(kept) if kept else Path(_session_dir("irscope-lessons-"))
    if not os.path.isdir(base / "var" / "toolchain"):
        seed_toolchain_cache(cache, str(base / "var"))
    # spare workers as `irscope serve` starts them: a lesson job is forked from a warm template
    # instead of importing torch itself (the way the lessons are compiled for their readers)
    app = make_app(base, languages=ALL_LANGUAGES, workers=2, warm_toolchain_cache=True, rate_limit="",
                   max_queued_jobs=0, wall_time_limit_s=600,
                   spare_workers=int(os.environ.get("IRSCOPE_TEST_LESSON_SPARES", "1")))
    svc = app.extensions["irscope"]
    ids = {}
    try:
        for lesson in lessons.load():
            sides = [("a", lesson.request)] + ([("b", lesson.compare.request)] if lesson.compare else [])
            for side, request in sides:
                ids[(lesson.slug, side)] = svc.jobs.submit(request)[0].id
        client = app.test_client()
        for job_id in ids.values():  # every job ends before anyone reads the store (or serves it)
            wait_job(client, job_id, timeout=1800)
    except BaseException:
        svc.runner.shutdown()
        raise
    return LessonJobs(app=app, data_dir=str(base / "var"), ids=ids)


def _session_dir(prefix: str) -> str:
    """A temporary directory for the session's compiles, removed when the process exits."""
    base = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    return base


class SessionCompile:
    """The session's compiles in a thread of their own, started when collection ends: the first job
    after a start (its server's warm-up builds the toolchain cache every warm app is seeded with),
    then every lesson. They run beside the modules before the first that needs them (the lesson
    store's readers run last: pytest_collection_modifyitems); the fixtures only wait."""

    def __init__(self):
        self.thread: threading.Thread | None = None
        self.results: dict[str, object] = {}
        self.lessons = False
        self.first_job_ended = threading.Event()

    def start(self, lessons: bool) -> None:
        if self.thread is None:
            self.lessons = lessons
            self.thread = threading.Thread(target=self._run, name="irscope-session-compile", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        try:
            try:
                if "first_job" not in self.results:
                    self.results["first_job"] = _first_job_after_start(Path(_session_dir("irscope-toolchain-warmup-")))
            finally:
                self.first_job_ended.set()
            if self.lessons:
                self.results["lessons"] = _lesson_jobs(self.results["first_job"][0])
        except BaseException as e:  # noqa: BLE001 - handed to the fixture that waits for it
            self.results.setdefault("error", e)

    def _wait(self, name: str):
        if name == "first_job":
            self.first_job_ended.wait()
        else:
            self.thread.join()
        if name not in self.results:
            raise self.results.get("error") or AssertionError(f"the session's compile did not make {name}")
        return self.results[name]

    def first_job(self) -> tuple[str, FirstJob]:
        self.start(lessons=False)
        return self._wait("first_job")

    def lesson_jobs(self) -> LessonJobs:
        if not self.lessons:  # collection saw no reader of the lesson store: compile it now
            if self.thread is not None:
                self.thread.join()
            self.thread = None
            self.start(lessons=True)
        return self._wait("lessons")


class AfterToolchainCache:
    """A module's `start_with_toolchain_cache(base, cache)`, run in a thread of its own as soon as
    the session's toolchain cache is built; `finish()` waits for it and returns what it returned."""

    def __init__(self, session: SessionCompile, start: Callable[[str, str], object], base: str):
        self.session, self.start, self.base = session, start, base
        self.result: object = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="irscope-after-toolchain-cache", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.start(self.base, self.session.first_job()[0])
        except BaseException as e:  # noqa: BLE001 - handed to the test that waits for it
            self.error = e

    def finish(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def after_toolchain_cache(request, tmp_path_factory):
    """What the requesting module's `start_with_toolchain_cache(base, cache)` returned: started when
    collection ended, in a thread that waited for the session's toolchain cache (started now if it
    was not)."""
    started = getattr(request.config, "irscope_background", {})
    job = started.pop(request.module.__name__ + "@toolchain_cache", None)
    if job is None:
        job = AfterToolchainCache(_session_compile(request.config), request.module.start_with_toolchain_cache,
                                  str(tmp_path_factory.mktemp("after-toolchain-cache")))
    return job.finish()


def _session_compile(config) -> SessionCompile:
    """The config's SessionCompile (kept on the config: test modules import this file again as
    tests.conftest)."""
    if not hasattr(config, "irscope_session_compile"):
        config.irscope_session_compile = SessionCompile()
    return config.irscope_session_compile


@pytest.fixture(scope="session")
def lesson_jobs(request) -> LessonJobs:
    """Every lesson of examples/ compiled once per session (_lesson_jobs), started when collection
    ended (pytest_collection_finish)."""
    session = _session_compile(request.config)
    # (a session stopped before this fixture ends still shuts the lessons' app down)
    request.config.add_cleanup(lambda: "lessons" in session.results and
                               session.results["lessons"].app.extensions["irscope"].runner.shutdown())
    jobs = session.lesson_jobs()
    yield jobs
    jobs.app.extensions["irscope"].runner.shutdown()


# --- real Redis and PostgreSQL, one of each per session (testbed/real_servers.py) ---------------------

@pytest.fixture(scope="session")
def redis_server():
    from testbed import real_servers
    if real_servers.redis_binary() is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; ./run.sh installs it as root)")
    server = real_servers.start_redis()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    from testbed import real_servers
    if real_servers.postgres_bindir() is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql; ./run.sh installs it as root)")
    server = real_servers.start_postgres()
    yield server
    server.stop()


_databases = iter(range(1, 1_000_000))


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh, empty PostgreSQL database of its own."""
    return postgres_server.create_database(f"irscope_test_{next(_databases)}")
