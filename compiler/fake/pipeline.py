"""A pipeline for tests: runs the source as Python (so sandbox limits can be exercised without the
seconds a torch import costs) and derives two stages from the text. A source that defines
`measure()` gets it called after every stage is written, as a compiler's measurement phase
(Bundle.compiled): what stops it then leaves the job done.

It is registered like any other pipeline but only offered when the `languages` setting names it.
"""
from __future__ import annotations

import time

from compiler.model import Request
from compiler.pipeline import JobContext, Option, Pipeline
from compiler.targets import TARGETS
from compiler.user_code import run_source, write_user_file


class FakePipeline(Pipeline):
    key = "fake"
    title = "Fake (tests)"
    accepts = "Python, run as it is (the test pipeline)"
    editor_mode = "python"
    example = 'print("hello")\nx = 1 + 1\n'
    # A job may ask for a pre-started worker (option `spare`), so the spares and the spare templates
    # are tested without the seconds a torch import costs; by default each job starts its own.
    prewarm_modules = ("json",)
    spare_kinds = ()
    template_kinds = ("template",)
    options = (
        Option("shout", "bool", False, "Uppercase the fake.lines stage."),
        Option("spare", "choice", "none", "The worker that runs the job: `none`, one started for it; `plain`, a "
                                          "pre-started spare; `template`, a process forked by a spare template "
                                          "(spares of a kind start when its first job arrives).",
               choices=("none", "plain", "template")),
        Option("stage_delay_s", "int", 0, "Seconds to wait between stages (to watch progress).", minimum=0, maximum=30),
        Option("target", "choice", "host", "The device the job asks for, routed like the compilers' target option "
                                           "(the fake pipeline compiles nothing for it; it records it).",
               choices=("host", "auto", *TARGETS)),
    )

    def spare_kind(self, request: Request) -> str | None:
        spare = request.options.get("spare", "none")
        return None if spare == "none" else spare

    def run(self, request: Request, ctx: JobContext) -> None:
        bundle = ctx.bundle
        source = request.source
        lines = source.split("\n")
        bundle.add("source", "Source", "Source", "python", source,
                   source_map=[[n, n] for n in range(1, len(lines) + 1)])
        bundle.progress("running the source")
        path = write_user_file(source, "fake_input.py", ctx.workdir)
        namespace, stdout = run_source(ctx, path)
        bundle.add("run.stdout", "Program output", "Run", "text", stdout)
        time.sleep(request.options.get("stage_delay_s", 0))
        text = source.upper() if request.options.get("shout") else source
        numbered = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(lines, start=1))
        bundle.add("fake.lines", "Numbered lines", "Fake", "text", text if request.options.get("shout") else numbered,
                   source_map=[[n, n] for n in range(1, len(lines) + 1)])
        if request.options["target"] != "host":
            bundle.add("fake.target", "Target", "Fake", "text", request.options["target"])
        names = sorted(k for k in namespace if not k.startswith("__"))
        bundle.add("fake.names", "Names defined", "Fake", "text", "\n".join(names))
        if callable(namespace.get("measure")):
            bundle.compiled()
            bundle.progress("measuring")
            namespace["measure"]()
