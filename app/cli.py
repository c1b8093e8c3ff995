"""The `irscope` command: `serve` the IDE, or `compile` one file headless."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

_EXTENSIONS = {".hlo": "hlo", ".mlir": "stablehlo"}


def _guess_language(path: str, source: str) -> str:
    ext = os.path.splitext(path)[1]
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if "@triton.jit" in source:
        return "triton"
    if "import jax" in source:
        return "jax"
    return "pytorch"


def _option(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--option takes key=value, not {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if args.data_dir:
        config["data_dir"] = args.data_dir
    if args.insecure_no_sandbox:
        config["sandbox"] = "none"
    return config


def serve(args: argparse.Namespace) -> int:
    """Check that user code can be run safely here, then serve with gunicorn (app/web_server.py)."""
    from app import create_app, sandbox_refusal
    from app import settings as settings_table
    from app.web_server import serve as serve_http
    config = _config(args)
    values = settings_table.load(config)
    os.makedirs(values["data_dir"], exist_ok=True)
    _user, refusal = sandbox_refusal(values)
    if refusal:
        print("irscope: " + refusal, file=sys.stderr)
        return 2
    if values["sandbox"] != "bwrap":
        print("irscope: WARNING: --insecure-no-sandbox: user code runs without bubblewrap", file=sys.stderr)
    if int(values["web_processes"]) != 1:
        print("irscope: web_processes must be 1 with the embedded store and worker pool", file=sys.stderr)
        return 2
    print(f"irscope: serving on http://{args.host}:{args.port}/ (data in {values['data_dir']})", flush=True)
    serve_http(lambda: create_app(config), args.host, args.port, int(values["web_threads"]),
               int(values["web_processes"]))
    return 0


def compile_(args: argparse.Namespace) -> int:
    from app import create_app
    from compiler.jobs import RequestError
    with open(args.file, encoding="utf-8") as f:
        source = f.read()
    language = args.language or _guess_language(args.file, source)
    config = _config(args)
    config.setdefault("languages", ",".join([language]))
    # A one-shot command does not start the background warm-up; it uses a cache `serve` built.
    config.setdefault("warm_toolchain_cache", False)
    config.setdefault("spare_workers", 0)
    app = create_app(config)
    svc = app.extensions["irscope"]
    if svc.refusal:
        print("irscope: " + svc.refusal, file=sys.stderr)
        return 2
    try:
        request = svc.jobs.parse({"language": language, "source": source, "options": dict(args.option or [])})
    except RequestError as e:
        print(f"irscope: {e}", file=sys.stderr)
        return 2
    job, _ = svc.jobs.submit(request)
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
    svc.runner.shutdown()
    return 1 if current.error else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="irscope", description="An interactive explorer for ML compilers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "compile"):
        p = sub.add_parser(name)
        p.add_argument("--data-dir", help="where the store lives (setting data_dir; default ./var)")
        p.add_argument("--insecure-no-sandbox", action="store_true",
                       help="run user code without bubblewrap (only on a machine you trust with that code)")
        if name == "serve":
            p.add_argument("--host", default="127.0.0.1")
            p.add_argument("--port", type=int, default=8000)
            p.set_defaults(func=serve)
        else:
            p.add_argument("file")
            p.add_argument("--language", help="pytorch, triton, hlo, stablehlo, jax (guessed from the file)")
            p.add_argument("--option", action="append", type=_option, metavar="KEY=VALUE",
                           help="a pipeline option; the value is JSON where it parses as JSON")
            p.add_argument("--json", action="store_true", help="print the whole job as JSON")
            p.set_defaults(func=compile_)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
