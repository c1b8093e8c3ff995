"""The `irscope` command: `serve` the IDE, `worker` for the worker tier, `compile` one file headless, or
`mcp`: irscope's MCP tools over stdio."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def _option(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--option takes key=value, not {text!r}")
    key, value = text.split("=", 1)
    return key, value


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if args.data_dir:
        config["data_dir"] = args.data_dir
    if args.insecure_no_sandbox:
        config["sandbox"] = "none"
    return config


def serve(args: argparse.Namespace) -> int:
    """Check that user code can be run safely here (embedded mode), then serve with gunicorn
    (app/web_server.py): one process with the embedded pool, several with a broker."""
    from app import create_app
    from app.web_server import serve as serve_http
    from service import settings as settings_table
    from service.configure import sandbox_refusal, web_settings, worker_settings
    config = _config(args)
    values = settings_table.load(config)
    hosts = list(web_settings(values).trusted_hosts)
    if args.host in ("0.0.0.0", "::"):
        if "*" not in hosts:
            print(f"irscope: serving on every address: requests are answered for the hosts {', '.join(hosts)} "
                  "only (setting trusted_hosts: add the names your clients use)", file=sys.stderr)
    elif args.host not in hosts and "*" not in hosts:
        config["trusted_hosts"] = ",".join([*hosts, args.host])
        values = settings_table.load(config)
    web, worker = web_settings(values), worker_settings(values)
    os.makedirs(worker.data_dir, exist_ok=True)
    processes = web.processes()
    if web.broker_url:
        where = f"jobs go to the worker tier at {_safe_url(web.broker_url)}; store {_safe_url(worker.database_url)}"
    else:
        _user, refusal = sandbox_refusal(values)
        if refusal:
            print("irscope: " + refusal, file=sys.stderr)
            return 2
        if not worker.sandboxed:
            print("irscope: WARNING: --insecure-no-sandbox: user code runs without bubblewrap", file=sys.stderr)
        if processes != 1:
            print("irscope: web_processes must be 1 with the embedded store and worker pool (set broker_url for "
                  "more)", file=sys.stderr)
            return 2
        where = f"data in {worker.data_dir}"
    print(f"irscope: serving on http://{args.host}:{args.port}/ ({processes} process{'es' if processes > 1 else ''}; "
          f"{where})", flush=True)
    serve_http(lambda: create_app(config), args.host, args.port, web.web_threads, processes)
    return 0


def _safe_url(url: str) -> str:
    """A database URL without its password."""
    from sqlalchemy.engine import make_url
    return make_url(url).render_as_string(hide_password=True)


def worker(args: argparse.Namespace) -> int:
    """One worker of the worker tier: take jobs from the broker's queues and run them here."""
    import logging

    from service import settings as settings_table
    from service import worker_daemon
    from service.configure import offered_languages, open_store, runner_config, sandbox_refusal, worker_settings
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("compiler").setLevel(logging.INFO)
    config = _config(args)
    for name, value in (("worker_queues", args.queues), ("workers", args.concurrency), ("worker_name", args.name)):
        if value:
            config[name] = value
    values = settings_table.load(config)
    settings = worker_settings(values)
    if not settings.broker_url:
        print("irscope: a worker needs the broker: set IRSCOPE_BROKER_URL (e.g. redis://host:6379/0) and "
              "IRSCOPE_DATABASE_URL (the store the web server uses)", file=sys.stderr)
        return 2
    name = settings.name or worker_daemon.default_name()
    data_dir = worker_daemon.worker_dir(settings.data_dir, name)
    os.makedirs(data_dir, exist_ok=True)
    user, refusal = sandbox_refusal(dict(values, data_dir=data_dir))
    if refusal:
        print("irscope: " + refusal, file=sys.stderr)
        return 2
    if not settings.sandboxed:
        print("irscope: WARNING: --insecure-no-sandbox: user code runs without bubblewrap", file=sys.stderr)
    if settings.database_url.startswith("sqlite"):
        print(f"irscope: WARNING: the store is SQLite ({_safe_url(settings.database_url)}): only a web server and "
              "workers on this machine share it; elsewhere set IRSCOPE_DATABASE_URL to the web server's PostgreSQL",
              file=sys.stderr)
    devices = worker_daemon.detect_devices()
    queues = settings.queues or worker_daemon.default_queues(devices)
    caps = worker_daemon.capabilities(devices, queues)
    for queue, has in caps["queues"].items():
        if not has["device"]:
            print(f"irscope: WARNING: this machine has no {queue} device: jobs sent to queue {queue} compile for "
                  f"a virtual one here (nothing runs)", file=sys.stderr)
    concurrency = settings.concurrency
    tier = worker_daemon.TierConfig(
        broker_url=settings.broker_url, queues=queues, concurrency=concurrency, name=name,
        languages=offered_languages(values), warm=settings.warm, heartbeat_s=settings.heartbeat_s,
        lost_after_s=settings.lost_after_s, attempts=settings.attempts)
    gpus = ", ".join(f"{g['name']} ({g['target']})" for g in devices.get("gpus", [])) or "none"
    print(f"irscope: worker {name}: queues {', '.join(queues)}; {concurrency} job{'s' if concurrency > 1 else ''} at "
          f"once; GPUs: {gpus}; store {_safe_url(settings.database_url)}", flush=True)
    store = open_store(values)
    return worker_daemon.WorkerTier(store, runner_config(values, user, data_dir=data_dir, workers=concurrency),
                                  tier, devices).serve()


def compile_(args: argparse.Namespace) -> int:
    """One job through the same service and sandbox as `serve`, without the web app."""
    from compiler import registry
    from compiler.errors import Refused
    from compiler.pipeline import OptionError
    from service import configure
    from service import settings as settings_table
    with open(args.file, encoding="utf-8") as f:
        source = f.read()
    config = _config(args)
    offered = configure.offered_languages(settings_table.load(config))
    language = args.language or registry.guess(args.file, source, offered)
    config.setdefault("languages", language)
    # A one-shot command does not start the background warm-up; it uses a cache `serve` built.
    config.setdefault("warm_toolchain_cache", False)
    config.setdefault("spare_workers", 0)
    svc = configure.start(settings_table.load(config), background=False)
    try:
        svc.admission.check_open()
        # each value read by its option's kind (`Option.from_text`), as the page's form fields are
        schema = {option.name: option for option in registry.get(language).options}
        options = {key: schema[key].from_text(text) if key in schema else text for key, text in args.option or []}
        request = svc.jobs.parse({"language": language, "source": source, "options": options})
        job, _ = svc.jobs.submit(request)
    except (Refused, OptionError) as e:
        print(f"irscope: {e.message if isinstance(e, Refused) else e}", file=sys.stderr)
        svc.shutdown()
        return 2
    while True:
        current = svc.store.get_job(job.id)
        if current and current.finished:
            break
        time.sleep(0.2)
    if args.json:
        body = current.to_json()
        for stage in body["stages"]:
            stage["text"] = svc.store.stage_text(job.id, stage["key"])[1]
        json.dump(body, sys.stdout, indent=1)
        print()
    else:
        for stage in current.stages:
            text = svc.store.stage_text(job.id, stage.key)[1]
            print(f"===== {stage.key} ({stage.title}, {stage.format}) =====")
            print(text.rstrip("\n"))
        if current.timings:
            print("===== timings =====")
            print(json.dumps(current.timings, indent=1))
        if current.error:
            line = f" at line {current.error.line}" if current.error.line else ""
            print(f"irscope: job failed: {current.error.kind}{line}: {current.error.message}", file=sys.stderr)
    svc.shutdown()
    return 1 if current.error else 0


def mcp(args: argparse.Namespace) -> int:
    """irscope's MCP tools over stdio: forwarded to `--server`, or on an embedded service."""
    from irscope import mcp_stdio
    if args.server:
        return mcp_stdio.serve_forwarded(args.server)
    from service import settings as settings_table
    from service.configure import sandbox_refusal, worker_settings
    config = _config(args)
    config.setdefault("spare_workers", 0)  # a session's jobs come one at a time
    values = settings_table.load(config)
    os.makedirs(worker_settings(values).data_dir, exist_ok=True)
    _user, refusal = sandbox_refusal(values)
    if refusal:
        print("irscope: " + refusal, file=sys.stderr)
        return 2
    return mcp_stdio.serve_embedded(values)


def gc(args: argparse.Namespace) -> int:
    """One collection of old jobs and unused uploads now (what `serve` does every gc_interval_s)."""
    from service import configure, retention
    from service import settings as settings_table
    values = settings_table.load(_config(args))
    svc = configure.start(values, background=False, resume=False)
    try:
        before = retention.stats(svc.store, svc.storage)
        done = svc.collect()
        after = retention.stats(svc.store, svc.storage)
    finally:
        svc.shutdown()
    print(json.dumps({"collected": done.to_json(), "before": before, "after": after}, indent=1))
    return 0


def toolchains(args: argparse.Namespace) -> int:
    """`irscope toolchains list | add NAME | remove NAME`: the compiler releases jobs may choose."""
    from service import configure, toolchain_envs
    from service import settings as settings_table
    values = settings_table.load(_config(args))
    directory = toolchain_envs.root(str(values["toolchains_dir"]))
    try:
        if args.action == "add":
            for name in args.names:
                toolchain_envs.add(name, directory, progress=lambda text: print(f"irscope: {text}", flush=True))
            if not args.no_warm:
                return _warm(values, args.names)
        elif args.action == "warm":
            return _warm(values, args.names)
        elif args.action == "remove":
            for name in args.names:
                toolchain_envs.remove(name, directory)
                print(f"irscope: removed {name}; its finished jobs' stages stay readable")
    except toolchain_envs.ToolchainError as e:
        print(f"irscope: {e}", file=sys.stderr)
        return 2
    if args.action == "list":
        languages = configure.offered_languages(values)
        listed = [toolchain_envs.describe(c, languages) for c in toolchain_envs.installed(directory)]
        if args.json:
            json.dump({"toolchains": listed}, sys.stdout, indent=1)
            print()
        for chain in [] if args.json else listed:
            versions = " ".join(f"{p} {v}" for p, v in chain["versions"].items())
            supports = ", ".join(f for f, yes in chain["supports"].items() if yes) or "none"
            print(f"{chain['name']}{' (default)' if chain['default'] else ''}: {versions}; "
                  f"{chain['size_bytes'] / 2**30:.2f} GiB; languages {', '.join(chain['languages'])}; "
                  f"supports {supports}")
    return 0


def _warm(values: dict[str, Any], names: list[str]) -> int:
    """Each toolchain's (`names`; none: every installed one) trusted warm-up for the data directory:
    the toolchain cache its jobs are seeded with, so that its first job is warm."""
    from compiler import registry
    from service import configure, toolchain_envs
    from service.toolchain import toolchain
    from service.toolchain_cache import warm_toolchain
    user, refusal = configure.sandbox_refusal(values)
    if refusal:
        print(f"irscope: {refusal}", file=sys.stderr)
        return 2
    config = configure.runner_config(values, user)
    os.makedirs(os.path.join(config.data_dir, "jobs"), exist_ok=True)
    chains = [c for c in toolchain_envs.installed(config.toolchains_dir) if not names or c.name in names]
    for chain in chains:
        for language in configure.offered_languages(values):
            pipeline = registry.get(language)
            if pipeline.warmup_source is None or pipeline.toolchain_refusal(pipeline.normalise_options({}),
                                                                            chain.versions) is not None:
                continue
            started = time.monotonic()
            built = warm_toolchain(config, language, toolchain(language, chain), None,
                                   None if chain.default else chain)
            print(f"irscope: {chain.name}: {language}'s toolchain cache in {config.data_dir} "
                  + (f"built in {time.monotonic() - started:.0f} s" if built else "was there already"), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    from compiler import registry  # the languages' keys, for --language's help (no compiler is imported)
    parser = argparse.ArgumentParser(prog="irscope", description="An interactive explorer for ML compilers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "compile", "worker", "gc", "mcp"):
        p = sub.add_parser(name)
        p.add_argument("--data-dir", help="where the store and job directories live (setting data_dir; default ./var)")
        p.add_argument("--insecure-no-sandbox", action="store_true",
                       help="run user code without bubblewrap (only on a machine you trust with that code)")
        if name == "serve":
            p.add_argument("--host", default="127.0.0.1")
            p.add_argument("--port", type=int, default=8000)
            p.set_defaults(func=serve)
        elif name == "gc":
            p.set_defaults(func=gc)
        elif name == "mcp":
            p.add_argument("--server", help="an irscope server's URL (http://host:port): forward the tools to its "
                                            "/mcp; without it, jobs run here, as `irscope compile` runs them")
            p.set_defaults(func=mcp)
        elif name == "worker":
            p.add_argument("--queues", help="queues to take jobs from: cpu, cuda:sm_90, ... (setting worker_queues; "
                                            "default: cpu and one per GPU found)")
            p.add_argument("--concurrency", type=int, help="jobs at once (setting workers)")
            p.add_argument("--name", help="this worker's name, unique per host (setting worker_name)")
            p.set_defaults(func=worker)
        else:
            p.add_argument("file")
            p.add_argument("--language", help=f"{', '.join(registry.offered())} (guessed from the file's "
                                              "extension and contents)")
            p.add_argument("--option", action="append", type=_option, metavar="KEY=VALUE",
                           help="a pipeline option, read by its kind (true/false, a number, a JSON object)")
            p.add_argument("--json", action="store_true", help="print the whole job as JSON")
            p.set_defaults(func=compile_)
    p = sub.add_parser("toolchains", help="list, add or remove the compiler releases jobs may choose "
                                          "(docs/toolchains.md)")
    p.add_argument("action", choices=("list", "add", "remove", "warm"))
    p.add_argument("names", nargs="*", metavar="NAME", help="torch-2.14.1, triton-3.8.0, jax-0.9.2, ...")
    p.add_argument("--json", action="store_true", help="list as JSON (GET /api/toolchains's body)")
    p.add_argument("--no-warm", action="store_true", help="add without the warm-up (the first job then runs it)")
    p.add_argument("--data-dir", help="warm: the data directory whose toolchain caches to build (setting data_dir)")
    p.set_defaults(func=toolchains, insecure_no_sandbox=False)
    args = parser.parse_args(argv)
    if args.command == "toolchains" and args.action in ("add", "remove") and not args.names:
        parser.error(f"toolchains {args.action} takes the toolchains' names")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
