"""The JSON API and the IDE routes, through the Flask test client and the fake pipeline (a real
sandboxed worker, no torch import)."""
from __future__ import annotations

import re
from urllib.parse import quote

from tests.conftest import compile_and_wait, stage_text, wait_job

SOURCE = 'print("hello from the sandbox")\nanswer = 6 * 7\nprint(answer)\n'


def test_compile_produces_stages_with_real_content(client):
    job = compile_and_wait(client, "fake", SOURCE)
    assert job["status"] == "done", job
    keys = [s["key"] for s in job["stages"]]
    assert keys[:2] == ["source", "run.stdout"]
    assert stage_text(client, job["id"], "run.stdout") == "hello from the sandbox\n42\n"
    assert stage_text(client, job["id"], "source") == SOURCE
    assert stage_text(client, job["id"], "fake.names") == "answer"
    assert job["timings"]["job"]["sandbox"] == "bubblewrap"
    assert job["toolchain"]["irscope"]


def test_stage_json_carries_source_map(client):
    job = compile_and_wait(client, "fake", SOURCE)
    body = client.get(f"/api/jobs/{job['id']}/stages/fake.lines?format=json").get_json()
    assert body["key"] == "fake.lines" and body["format"] == "text"
    assert "   2  answer = 6 * 7" in body["text"]
    assert [2, 2] in body["source_map"] and len(body["source_map"]) == 4


def test_same_request_is_answered_from_the_store(client):
    first = compile_and_wait(client, "fake", SOURCE)
    again = client.post("/api/compile", json={"language": "fake", "source": SOURCE.replace("\n", "\r\n")})
    assert again.status_code == 200
    assert again.get_json()["job"] == first["id"] and again.get_json()["cached"] is True
    other = client.post("/api/compile", json={"language": "fake", "source": SOURCE, "options": {"shout": True}})
    assert other.get_json()["job"] != first["id"]


def test_syntax_error_names_its_line_and_server_keeps_serving(client):
    job = compile_and_wait(client, "fake", "x = 1\ny = (\nprint(x)\n")
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "SyntaxError"
    assert job["error"]["line"] == 2
    assert "line 2" in job["error"]["message"]
    assert [s["key"] for s in job["stages"]] == ["source"]  # what was produced is kept
    assert compile_and_wait(client, "fake", SOURCE)["status"] == "done"


def test_exception_names_the_users_line(client):
    job = compile_and_wait(client, "fake", "a = 1\n\ndef f():\n    return 1 / 0\n\nf()\n")
    assert job["error"]["kind"] == "UserCodeError"
    assert job["error"]["line"] == 4
    assert "ZeroDivisionError" in job["error"]["message"]


def test_bad_requests_are_clear_errors(client):
    r = client.post("/api/compile", json={"language": "cobol", "source": "x"})
    assert r.status_code == 400 and "unknown language 'cobol'" in r.get_json()["error"]["message"]
    r = client.post("/api/compile", json={"language": "fake", "source": "x", "options": {"nope": 1}})
    assert r.status_code == 400 and "unknown option 'nope'" in r.get_json()["error"]["message"]
    r = client.post("/api/compile", json={"language": "fake", "source": "x", "options": {"stage_delay_s": 99}})
    assert r.status_code == 400 and "at most 30" in r.get_json()["error"]["message"]
    r = client.post("/api/compile", data="not json", content_type="text/plain")
    assert r.status_code == 400
    assert client.get("/api/jobs/nope").status_code == 404
    assert client.get("/api/jobs/nope/stages/source").status_code == 404


def test_shortlink_round_trip(client):
    job = compile_and_wait(client, "fake", SOURCE)
    link = client.post("/api/shortlinks", json={"job": job["id"]}).get_json()
    assert link["url"] == f"/z/{link['id']}" and 6 <= len(link["id"]) <= 10
    # derived from the request: asking again gives the same id
    assert client.post("/api/shortlinks", json={"job": job["id"]}).get_json()["id"] == link["id"]
    page = client.get(link["url"]).get_data(as_text=True)
    assert "hello from the sandbox" in page  # the source, in the editor
    assert 'data-key="run.stdout"' in page  # the stored stages, as tabs
    as_json = client.get(link["url"] + ".json").get_json()
    assert as_json["job"]["id"] == job["id"]
    assert as_json["job"]["request"]["source"] == SOURCE
    assert as_json["job"]["toolchain"] == job["toolchain"]
    assert client.get("/z/unknown1").status_code == 404


def test_qualified_stage_keys_travel_percent_encoded(client):
    job = compile_and_wait(client, "fake", SOURCE)
    assert client.get(f"/api/jobs/{job['id']}/stages/{quote('fake.lines', safe='')}").status_code == 200
    pane = client.get(f"/j/{job['id']}/stage/fake.lines").get_data(as_text=True)
    assert 'data-src="2"' in pane and "answer" in pane


def test_ide_page_and_htmx_compile(client):
    page = client.get("/").get_data(as_text=True)
    assert "codemirror.js" in page and "htmx.min.js" in page and 'name="language"' in page
    r = client.post("/compile", data={"language": "fake", "source": SOURCE, "opt.shout": "true"})
    assert r.status_code == 200 and r.headers["HX-Push-Url"].startswith("/j/")
    job_id = r.headers["HX-Push-Url"].rsplit("/", 1)[1]
    job = wait_job(client, job_id)
    assert job["request"]["options"]["shout"] is True
    assert stage_text(client, job_id, "fake.lines").startswith('PRINT("HELLO')
    page = client.get(f"/j/{job_id}").get_data(as_text=True)
    assert "hello from the sandbox" in page
    assert 'data-key="fake.lines"' in page
    assert "hx-trigger" not in page  # a finished job is not polled any more


def test_a_form_field_not_of_its_options_kind_is_a_sentence_naming_the_option(client):
    """Form fields are text, read by their option's kind (Option.from_text); one that is not of
    that kind is refused with the option's name (before the form went through as a string)."""
    r = client.post("/compile", data={"language": "fake", "source": SOURCE, "opt.stage_delay_s": "soon"})
    assert r.status_code == 400, r.get_data(as_text=True)[:300]
    assert "option &#39;stage_delay_s&#39; takes an integer, not &#39;soon&#39;" in r.get_data(as_text=True) or \
        "option 'stage_delay_s' takes an integer, not 'soon'" in r.get_data(as_text=True)
    r = client.post("/compile", data={"language": "fake", "source": SOURCE + "# typed\n", "opt.stage_delay_s": "0",
                                      "opt.spare": "none", "opt.target": "host"})
    assert r.status_code == 200
    job = wait_job(client, r.headers["HX-Push-Url"].rsplit("/", 1)[1])
    assert (job["request"]["options"]["stage_delay_s"], job["request"]["options"]["spare"]) == (0, "none")


def test_diff_between_stages(client):
    job = compile_and_wait(client, "fake", SOURCE)
    pane = client.get(f"/j/{job['id']}/stage/fake.lines?diff=source").get_data(as_text=True)
    assert "gd" in pane and "gi" in pane  # pygments' deleted / inserted line classes


def test_languages_lists_option_schemas(client):
    body = client.get("/api/languages").get_json()
    fake = next(lang for lang in body["languages"] if lang["key"] == "fake")
    assert {o["name"] for o in fake["options"]} == {"shout", "spare", "stage_delay_s", "target"}


def test_timings_view_draws_measured_numbers():
    from viewers import timings
    html = timings.render({"compile": {"dynamo_tracing_s": 0.25, "total_s": 2.5, "source": "events"},
                           "run": {"eager_ms": 2.0, "compiled_ms": 1.0, "speedup": 2.0, "where": "host CPU"}})
    assert html.count("<rect") == 4  # two phases, two run bars
    assert "dynamo tracing: 0.25 s" in html and "compiled: 1 ms" in html and "host CPU" in html
    # a table shows no raw Python value: a list as words, a flag as yes/no, a missing value as "none"
    html = timings.render({"target": {"name": "sm_90", "virtual": True, "units": [4, 8], "spare": None}})
    assert "<td>4, 8</td>" in html and "<td>yes</td>" in html and "<th>spare</th><td>none</td>" in html
    assert "[4, 8]" not in html and "True" not in html and "None" not in html


# A default PyTorch job's timings as the pipeline records them (compiler/pytorch/measure.py,
# entry_points.RunMode, targets.describe_target), the compiled side slower than eager.
DEFAULT_JOB_TIMINGS = {
    "run": {"where": "host CPU (2 threads), blocks of calls of about 10 ms each", "what": "forward",
            "statistic": "median over the timed blocks of the time per call, after warm-up; spread is the IQR",
            "seconds_per_side": 0.5, "eager_ms": 0.0078, "eager_iqr_ms": 0.0051, "eager_repeats": 40,
            "eager_calls_timed": 52000, "eager_measure_s": 0.52, "compiled_ms": 0.0119, "compiled_iqr_ms": 0.0012,
            "compiled_repeats": 38, "compiled_calls_timed": 31000, "compiled_measure_s": 0.5, "speedup": 0.656,
            "accuracy": {"vs_eager": {"compared": 1, "max_abs_error": 2.4e-07, "max_rel_error": 6.7e-06},
                         "vs_float64_eager": {"compared": 1, "max_abs_error": 2.8e-07, "max_rel_error": 1.1e-05}},
            "profile_s": 0.142,
            "memory": {"eager_peak_bytes": 22592, "compiled_peak_bytes": 3 * 2**20, "how": "torch.profiler"}},
    "run_mode": {"mode": "compile-and-run", "sentence": "compile-and-run: the run would peak at 193.9 KiB",
                 "float64_reference": True, "measured_peak_bytes": 69517312, "estimated_peak_bytes": 503232},
    "target": {"name": "host CPU", "virtual": False, "executed": True, "worker_device": None},
}


def test_timings_are_figures_in_words_with_their_units_and_slower_is_flagged(tmp_path):
    """The Timings tab says what each figure measures and in what unit, never a raw key; medians
    come with their spread; a compiled call slower than eager says so, flagged; a heading always
    has something under it."""
    import re

    from viewers import timings
    html = timings.render(DEFAULT_JOB_TIMINGS)
    text = re.sub(r"<[^>]+>", " ", html)
    for raw in ("eager_iqr_ms", "measured_peak_bytes", "float64_reference", "worker_device", "speedup",
                "69517312", "0.656"):
        assert raw not in text, raw
    # the ratio of the medians, 0.0119 / 0.0078 (1 / speedup, rounded to 0.01, said 1.52×)
    assert re.search(r'<p class="verdict slower"><b>compiled 1\.53× slower than eager</b>', html), html
    # the eighth walk's run: 43.830 ms against 0.457 ms, `speedup` 0.01, was said "100.00× slower"
    far = dict(DEFAULT_JOB_TIMINGS["run"], eager_ms=0.457, eager_iqr_ms=0.05, compiled_ms=43.83,
               compiled_iqr_ms=0.4, speedup=0.01)
    assert "<b>compiled 95.9× slower than eager</b>" in timings.render({"run": far})
    # the job bar's line and its unfolded list say the same ratio (the list said "0.01× eager's speed")
    from app import create_app
    flask_app = create_app({"data_dir": str(tmp_path / "var"), "languages": "fake", "workers": 1,
                            "warm_toolchain_cache": False})
    try:
        bar = flask_app.jinja_env.get_template("_timings.html").render(job={"timings": {"run": far}})
    finally:
        flask_app.extensions["irscope"].runner.shutdown()
    assert bar.count("compiled 95.9× slower than eager") == 2 and "eager's speed" not in bar, bar
    # ... and as it was measured, eager's blocks ± 63.7 ms around a median of 0.457 ms: no verdict
    busy = dict(far, eager_iqr_ms=63.7)
    from compiler import formats
    assert formats.speed_verdict(busy) == (
        "compiled and eager within noise (43.8 ms against 0.457 ms per call; the eager side's spread (± 63.7 ms) is "
        "larger than its median)", "noise")
    assert "median 0.0078 ms per call, spread ± 0.0051 ms" in text and "median 0.0119 ms per call" in text
    assert "measured peak memory of the job&#39;s process</th><td>66.3 MiB" in html
    assert "compiled, peak memory of one call</th><td>3.0 MiB" in html and "22.1 KiB" in html
    assert "float64 reference of the accuracy check</th><td>yes" in html
    assert "the worker&#39;s own GPU</th><td>none" in html
    assert "compiled against eager</th><td>largest absolute error 2.4e-07, largest relative error 6.7e-06" in html
    # every heading is followed by something other than another heading
    for m in re.finditer(r"</h[34]>", html):
        assert not re.match(r"\s*(<h[34]>|$)", html[m.end():]), html[m.start() - 80:m.end() + 40]
    # an accuracy with nothing to compare is said in words; an empty one has no heading at all
    empty = timings.render({"run": {"compiled_ms": 1.0, "accuracy": {}}})
    assert "Accuracy" not in empty
    nothing = timings.render({"run": {"compiled_ms": 1.0, "accuracy": {"vs_eager": {"compared": 0}}}})
    assert "nothing compared" in nothing
    # a target's notes are sentences, read one after another (the fifth walk read "exists., Inputs")
    notes = timings.render({"target": {"name": "cuda:sm_90", "notes": ["No kernel ran, so no timing exists.",
                                                                        "Inputs are fake tensors."]}})
    assert "No kernel ran, so no timing exists. Inputs are fake tensors." in notes and "., " not in notes


def test_timings_say_what_each_figure_measures_and_a_difference_within_noise_is_no_verdict():
    """The compile chart keeps totals apart from the phases they hold, each bar titled with what it
    measures and where it comes from; a speed difference the timed runs' spreads cover is said to be
    within noise, on the Timings tab and in the job bar's summary, with no faster/slower flag."""
    import re

    from service.glance import _speed
    from viewers import timings
    run = {"eager_ms": 2.71, "eager_iqr_ms": 0.9, "compiled_ms": 2.19, "compiled_iqr_ms": 18.0,
           "compiled_repeats": 3, "speedup": 1.24}
    compile_t = {"dynamo_tracing_s": 0.4, "kernel_compile_s": 8.0, "total_s": 10.7, "import_torch_s": 0.0,
                 "run_source_s": 0.2, "first_call_s": 10.8, "final_stages_s": 0.3,
                 "source": "Dynamo's phases from PyTorch's dynamo_timed events; the others from irscope's own clock"}
    html = timings.render({"compile": compile_t, "run": run})
    phases, totals = html.split("<h3>Run time</h3>", 1)[0].split("<h4>Totals</h4>", 1)
    labels = lambda part: re.findall(r'text-anchor="end" font-size="12">([^<]+)</text>', part)  # noqa: E731
    assert labels(totals) == ["total", "first call"], labels(totals)
    assert "total" not in labels(phases) and "first call" not in labels(phases) and "run source" in labels(phases)
    titles = re.findall(r"<g class=\"bar\"><title>([^<]+)</title>", html)
    assert len(titles) == 9 and all(" — " in t for t in titles), titles
    assert any(t.startswith("import torch: 0 s — importing torch") and "irscope&#39;s own clock" in t
               for t in titles), titles
    assert "within noise" in html and "faster" not in re.sub(r"<[^>]+>", " ", html.split("Run time", 1)[1])
    assert 'class="verdict noise"' in html
    item = _speed(run)
    assert item.text == "compiled vs eager: within noise" and not item.warn
    # apart by more than their spreads: a verdict
    clear = dict(run, compiled_iqr_ms=0.1, compiled_ms=1.0, speedup=2.71)
    assert _speed(clear).text == "compiled 2.71× faster than eager"
    assert "within noise" not in timings.render({"run": clear})


def test_the_job_bars_timing_line_says_the_same_verdict(app):
    """The job bar's one line of figures said "(1.97× faster)" beside a summary saying "within
    noise": it now says the one verdict (speed_verdict) too."""
    import types

    from flask import render_template
    noisy = {"eager_ms": 2.71, "eager_iqr_ms": 0.9, "compiled_ms": 2.19, "compiled_iqr_ms": 18.0, "speedup": 1.24}
    clear = dict(noisy, compiled_iqr_ms=0.1, compiled_ms=1.0, speedup=2.71)
    slow = dict(noisy, compiled_iqr_ms=0.1, eager_iqr_ms=0.1, compiled_ms=5.42, speedup=0.5)
    with app.test_request_context():
        said = {name: render_template("_timings.html", job=types.SimpleNamespace(timings={"run": run}))
                for name, run in (("noisy", noisy), ("clear", clear), ("slow", slow))}
    summary = {name: html.split("</summary>", 1)[0] for name, html in said.items()}
    assert "(within noise)" in summary["noisy"] and "faster" not in summary["noisy"]
    assert "(compiled 2.71× faster than eager)" in summary["clear"]
    assert '<b class="slower">(compiled 2.00× slower than eager)</b>' in summary["slow"]
    # the compile figures unfolded each say what they measure on hover: the whole compile (Dynamo's
    # clock) beside a first call four times as long read as a contradiction (the sixth walk)
    with app.test_request_context():
        figures = render_template("_timings.html", job=types.SimpleNamespace(
            timings={"compile": {"total_s": 7.33, "first_call_s": 31.6, "dynamo_tracing_s": 0.4}}))
    assert re.search(r'<span title="the whole compile of every frame[^"]*">whole compile 7\.33 s</span>', figures)
    assert re.search(r'<span title="the compiled model&#39;s first call, which compiles it[^"]*">first call 31\.60 s',
                     figures), figures


def test_oversized_stage_is_cut_at_a_line_and_says_so(tmp_path):
    from compiler.pipeline import Bundle
    bundle = Bundle(str(tmp_path / "out"), max_stage_bytes=1000)
    text = "".join(f"line {n:04d}\n" for n in range(1, 501))  # 5000 bytes
    stage = bundle.add("big", "Big", "G", "text", text, source_map=[[1, 1], [90, 2], [300, 3]])
    kept = open(tmp_path / "out" / stage.file).read()
    assert kept.endswith("line 0100") and stage.size == len(kept) == 999  # 100 whole lines of 10 bytes
    assert stage.meta["truncated"] == {"bytes": 5000, "kept_bytes": 999, "kept_lines": 100}
    assert "stage limit (setting max_stage_kb)" in stage.meta["note"]
    assert stage.source_map == [[1, 1], [90, 2]]


def test_a_class_compiling_the_same_example_at_once_makes_one_job(app):
    """Thirty students press Compile on the same example in the same moment (each from an address
    of their own): one job is made and every one of them is answered with it."""
    import threading
    source = "print('the same example for everyone')\n"
    answers: list = [None] * 30
    gate = threading.Barrier(30)

    def student(n: int) -> None:
        gate.wait()
        answers[n] = app.test_client().post("/api/compile", json={"language": "fake", "source": source},
                                            environ_base={"REMOTE_ADDR": f"10.0.0.{n + 1}"}).get_json()
    threads = [threading.Thread(target=student, args=(n,)) for n in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({a["job"] for a in answers}) == 1, {a["job"] for a in answers}
    assert sum(1 for a in answers if not a["cached"]) == 1
    assert app.extensions["irscope"].store.counts()["jobs"] == 1


def test_a_failed_job_opens_what_the_compiler_made_and_never_the_source_beside_its_error():
    """The stage opened beside an error: the last the compiler produced before the failure, else
    what the program printed; else none. Before, a shape mismatch opened the Source stage, the
    editor's text again with every line tinted in both; the worker's log (PyTorch's tracebacks,
    folded in the error) and the frame's bytecode say nothing of the error either."""
    from types import SimpleNamespace

    from app.ide import stage_beside_error, stage_to_open

    def stages(*rows):
        return [SimpleNamespace(key=k, group=g, size=n, format="json" if k.endswith("launches") else "text")
                for k, g, n in rows]
    source, log = ("source", "Source", 316), ("worker.log", "Run", 4306)
    # a shape mismatch: Dynamo logged only the frame's original bytecode, which says nothing of it
    shape_mismatch = stages(source, ("run.stdout", "Run", 0), ("dynamo.bytecode:0/0", "Dynamo", 360), log)
    assert stage_beside_error(shape_mismatch) == ""
    failed = SimpleNamespace(finished=True, status="failed", stages=shape_mismatch)
    assert stage_to_open(failed) == ""  # not the first stage with text either: nothing
    graph_so_far = stages(source, ("dynamo.fx_graph:0/0", "Dynamo", 900), ("dynamo.bytecode:0/0", "Dynamo", 360), log)
    assert stage_beside_error(graph_so_far) == "dynamo.fx_graph:0/0"
    assert stage_to_open(SimpleNamespace(finished=True, status="failed", stages=graph_so_far)) == "dynamo.fx_graph:0/0"
    # a Triton compile error: Launches holds `[]`, nothing to read
    assert stage_beside_error(stages(source, ("triton.launches", "Run", 2), ("run.stdout", "Run", 0), log)) == ""
    later = stages(source, ("dynamo.fx_graph:0/0", "Dynamo", 900), ("aot.joint_graph:0/0", "AOTAutograd", 0),
                   ("aot.forward_graph:0/0", "AOTAutograd", 400), log)
    assert stage_beside_error(later) == "aot.forward_graph:0/0"  # the last with text
    assert stage_beside_error(stages(source, ("run.stdout", "Run", 25), log)) == "run.stdout"
    # an HLO module that fails to parse: its Input is the editor's text too (the eighth walk saw a
    # JAX error open it: the Python echoed, every line tinted)
    assert stage_beside_error(stages(("xla.input", "Input", 180), log)) == ""
    assert stage_beside_error(stages(source)) == ""
    assert stage_beside_error(stages(("run.stdout", "Run", 0), log)) == ""
    assert stage_beside_error(stages(("run.stdout", "Run", 0))) == "" and stage_beside_error([]) == ""
    # a failed job that wrote nothing to read at all opens nothing: its empty output beside the
    # error was the first walk's complaint, and the fifth walk's (a Helion file that calls no kernel)
    empty = SimpleNamespace(finished=True, status="failed", stages=stages(("triton.launches", "Run", 2),
                                                                          ("run.stdout", "Run", 0)))
    assert stage_to_open(empty) == ""
    # a job that compiled opens its most useful stage as before, never the source
    done = SimpleNamespace(finished=True, status="done", stages=stages(source, ("dynamo.fx_graph:0/0", "Dynamo", 900)))
    assert stage_to_open(done) == "dynamo.fx_graph:0/0"


def test_every_notice_of_a_stage_pane_is_one_line_with_the_rest_folded(app):
    """A stage pane's notices (explanation, note, what a file its text names is) are one line each:
    a note of one long sentence (the SASS one) is its lead up to a clause, the rest folded in a
    <details>; a note of several sentences shows its first; a hashed file name is cut in its
    middle in the lead, whole in the fold, with what the file is and the link to its stage on the
    line; a short notice is a plain line; every fold is a <details> whose <summary> Tab reaches."""
    import re
    import types

    from flask import render_template

    from app.ide import NOTICE_LEAD, notice_parts
    from compiler.kernels.stages import PTX_NOTE, SASS_NOTE
    hashed = "c2dbtpnvwyg7lm2u2r4e3pypk3qc2gcqvpmryilclbyit4gtzjnt.py"
    one_sentence = ("LLVM numbers inline-asm lines as source lines and ptxas keeps them, so nvdisasm may name a "
                    "line below the real one (past the kernel's end even); such lines are mapped back")
    meta = {"note": one_sentence,
            "file_names": [{"path": f"/tmp/work/cache/{hashed}", "file": hashed,
                            "name": "the Triton code Helion generated for your kernel add",
                            "about": "its lines link to yours through Helion's # src[file:line] comments",
                            "stage": "helion.triton_code:add", "stage_title": "Triton code add"},
                           {"path": "/tmp/work/model.py", "file": "model.py", "name": "your source"}]}
    stage = types.SimpleNamespace(key="triton.sass:add", title="SASS add", format="sass", size=10, meta=meta)
    with app.test_request_context():
        html = render_template("_artifact.html", job_id="j1", stage=stage, body="", diff_with=None, siblings=[],
                               explanation="Short.", source_map_json="[]", pages=None)
    notices = re.findall(r'<(details|p) class="(explain|note[^"]*)">(.*?)</\1>', html, re.S)
    assert [(tag, cls) for tag, cls, _ in notices] == [
        ("p", "explain"), ("details", "note"), ("details", "note file-name"), ("p", "note file-name")]
    lead = re.search(r"<summary>(.*?)</summary>", notices[1][2], re.S).group(1)
    assert lead == "LLVM numbers inline-asm lines as source lines and ptxas keeps them…"
    assert notices[1][2].split("</summary>")[1].startswith("so nvdisasm may name a line")
    named, rest = notices[2][2].split("</summary>")
    assert f">{hashed}<" not in named and f'title="/tmp/work/cache/{hashed}">c2dbtpnvwyg7lm2…tzjnt.py<' in named
    assert re.search(r'<a href="#" hx-get="/j/j1/stage/helion.triton_code%3Aadd" [^>]*>the Triton code Helion '
                     r"generated for your kernel add</a>\.", named)
    assert f"<code>{hashed}</code>" in rest and "Its lines link to yours through Helion&#39;s # src" in rest
    assert "<code title=\"/tmp/work/model.py\">model.py</code> in this stage's text is your source." in notices[3][2]
    # the notes irscope writes: a first sentence a line can hold the start of, the rest folded
    for note in (PTX_NOTE, SASS_NOTE):
        first, rest = notice_parts(note)
        assert rest and first.endswith(".") and first[0].isupper(), note
    assert len(notice_parts(SASS_NOTE)[0]) <= NOTICE_LEAD
