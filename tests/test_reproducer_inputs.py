"""What a reproducer embeds is data (issue 37, part 3), and options are typed strictly.

A reproducer is a script someone runs on their own machine; whoever made the job chose its source
and options. Before: `python_literal` lost a source's trailing quotes (`s = ''` read back as `s = `,
and a source ending in one quote made the script a SyntaxError), and an HLO job's XLA option
`{"xla_gpu_cuda_data_dir": "x --xla_dump_to=/tmp/attacker-chosen ..."}` was spliced unquoted into
the script's XLA_FLAGS, so running it dumped into the attacker's folder with a flag the server
itself refuses. And `devices: "8"` (a string) was accepted as an integer.

Here: any string round-trips through the source literal (a property test); for every language with
a reproducer, a hostile source and every option's hostile value are either refused as the job
refuses them or inert in the script: its syntax tree equals the tree of a benign value's script
once string constants are blanked, so no value adds a statement, a call or a flag.
"""
from __future__ import annotations

import ast
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import registry, reproducers
from compiler.model import Request
from compiler.pipeline import OptionError

HOSTILE = [
    "'", "''", "s = ''", "s = '", '"""', "'''", "x''' + __import__('os').system('id') + r'''y",
    "\\", "ends with a backslash \\", "\\N{BULLET}", "\\u0041\\x00", "a\x00b", "\r\n", "line\rreturn",
    "\"\"\"\nimport os\nos.system('id')\n\"\"\"", "é ∑ 😀 \u202e", "\x1b[31m", "\u2028\u2029",
    "x --xla_dump_to=/tmp/attacker-chosen --xla_dump_hlo_as_proto=true", "--xla_dump_to=/tmp/attacker",
    "${HOME}$(id)`id`", "{0}{source}%s", "\t\v\f",
]
# A key each dict option takes (the test fails for a new dict option until it is named here).
DICT_KEYS = {"xla_options": "xla_cpu_max_isa", "inductor_config": "triton.descriptive_names"}
TOOLCHAIN = {"irscope": "test", "torch": "2.13.0", "triton": "3.9.0", "jax": "0.10.2", "jaxlib": "0.10.2"}


# The conventions' names (PyTorch's and JAX's), so a source is compiled by irscope's own call and
# has a reproducer; a program without them runs as written and is its own reproducer (None).
CONVENTION = "\nmodel = fn = len\nexample_inputs = example_args = ()\n"


def _reproducing() -> list[str]:
    return [k for k in registry.keys()
            if registry.get(k).reproducer(Request(k, registry.get(k).example, {}), TOOLCHAIN, "abc") is not None]


def _shape(script: str) -> str:
    """The script's syntax tree with every string constant blanked: what it does, not what it says."""
    tree = ast.parse(script)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            node.value = type(node.value)()
    return ast.dump(tree)


def _script(language: str, source: str, options: dict) -> str:
    pipeline = registry.get(language)
    request = Request(language, source, pipeline.normalise_options(options))
    return pipeline.reproducer(request, TOOLCHAIN, "abc")


def _assigned(script: str, name: str):
    """The value the script assigns to `name` at its top level (a literal, or json.loads of one)."""
    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    raise AssertionError(f"the script assigns no {name}")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_round_trips_through_the_source_literal(text):
    literal = reproducers.python_literal(text)
    assert ast.literal_eval(literal) == text


@pytest.mark.parametrize("text", HOSTILE + ["s = ''\n", "x = '", "a\\", "r'''", "'''\n'''"])
def test_hostile_texts_round_trip_and_the_readable_form_is_kept_where_it_reads_back(text):
    literal = reproducers.python_literal(text)
    assert ast.literal_eval(literal) == text
    if text == "s = ''\n":  # before: r'''s = '''''  which Python reads as 's = '
        assert literal.startswith("r'''")


@pytest.mark.parametrize("language", _reproducing())
def test_a_hostile_source_is_data_in_every_reproducer(language):
    pipeline = registry.get(language)
    benign = _shape(_script(language, "benign" + CONVENTION, {}))
    for text in HOSTILE:
        script = _script(language, text + CONVENTION, {})
        assert _shape(script) == benign, (language, text)
        assert ast.literal_eval(_assigned(script, "SOURCE")) == text + CONVENTION, (language, text)
    assert pipeline.reproducer is not None


def test_a_program_that_calls_the_compiler_itself_has_no_reproducer_of_irscopes():
    assert _script("pytorch", "import torch\nf = torch.compile(len)\n", {}) is None
    assert _script("jax", "import jax\nf = jax.jit(len)\n", {}) is None
    assert _script("pytorch", "import torch" + CONVENTION, {}) is not None


def _sites(option) -> list:
    """Where a hostile string can go in `option`'s value: (hostile value, benign twin) builders."""
    if option.kind == "str":
        return [lambda h: h]
    if option.kind == "dict":
        key = DICT_KEYS[option.name]
        return [lambda h: {h: "benign"}, lambda h, key=key: {key: h}]
    return [lambda h: h]  # bool, int, choice: a string is refused outright


@pytest.mark.parametrize("language", _reproducing())
def test_every_options_hostile_value_is_refused_or_inert_in_the_reproducer(language):
    pipeline = registry.get(language)
    inert = refused = 0
    for option in pipeline.options:
        for site in _sites(option):
            try:
                benign = _shape(_script(language, "x = 1" + CONVENTION, {option.name: site("benign")}))
            except OptionError:
                benign = None  # the benign twin is refused too (a choice, an unknown key)
            for text in HOSTILE:
                try:
                    script = _script(language, "x = 1" + CONVENTION, {option.name: site(text)})
                except OptionError:
                    refused += 1
                    continue
                assert benign is not None, (option.name, text)
                assert _shape(script) == benign, (language, option.name, text)
                inert += 1
    assert refused > 0  # every language has an option a string does not fit


def test_the_attack_reviews_xla_flags_are_refused_and_options_never_reach_xla_flags():
    hlo = registry.get("hlo")
    with pytest.raises(OptionError, match="names a file or directory"):
        hlo.normalise_options({"xla_options": {"xla_gpu_cuda_data_dir": "x --xla_dump_to=/tmp/attacker-chosen"}})
    with pytest.raises(OptionError, match="one token"):
        hlo.normalise_options({"xla_options": {"xla_cpu_max_isa": "AVX2 --xla_dump_to=/tmp/attacker"}})
    with pytest.raises(OptionError, match="set by irscope itself"):
        hlo.normalise_options({"xla_options": {"xla_dump_to": "/tmp/attacker"}})
    # a one-token value that looks like a flag is a compile option's value, not a flag
    script = _script("hlo", hlo.example, {"xla_options": {"xla_cpu_max_isa": "--xla_dump_to=/tmp/attacker",
                                                          "xla_disable_hlo_passes": ["algsimp", "cse"]}})
    flags = ast.literal_eval(_assigned(script, "XLA_FLAGS")).split()
    assert {f.split("=", 1)[0] for f in flags} == {"--xla_force_host_platform_device_count", "--xla_dump_hlo_pass_re",
                                                   "--xla_dump_hlo_as_text", "--xla_dump_include_timestamp"}, flags
    assert "attacker" not in " ".join(flags)
    # the script's own statements that build them, run alone
    def builds(node: ast.stmt) -> bool:
        if isinstance(node, ast.Assign):
            return any(isinstance(t, ast.Name) and t.id in ("OVERRIDES", "PASS_LISTS") for t in node.targets)
        return isinstance(node, ast.Expr) and ast.unparse(node).startswith("OVERRIDES.")
    wanted = [node for node in ast.parse(script).body if builds(node)]
    namespace: dict = {"DUMP": "/d", "json": json}
    exec(compile(ast.Module(wanted, type_ignores=[]), "reproducer", "exec"), namespace)
    assert namespace["OVERRIDES"]["xla_cpu_max_isa"] == "--xla_dump_to=/tmp/attacker"
    assert namespace["OVERRIDES"]["xla_dump_to"] == "/d"
    assert namespace["PASS_LISTS"] == {"xla_disable_hlo_passes": "algsimp,cse"}


WRONG_TYPES = {"bool": ["true", 1, None], "int": ["8", True, 8.0, None], "str": [8, None, ["x"]],
               "dict": ["{}", [], None]}


@pytest.mark.parametrize("language", registry.keys())
def test_every_option_is_typed_strictly_and_its_text_form_is_read_by_kind(language):
    """A request's option is JSON's own type (`devices: "8"` is refused); a form field's or a
    command line's text is read by the option's kind (`Option.from_text`)."""
    pipeline = registry.get(language)
    for option in pipeline.options:
        wrong = WRONG_TYPES.get(option.kind, ["not one of them", 10**9, None])
        if option.kind == "choice":
            wrong = [w for w in wrong if all(type(w) is not type(c) or w != c for c in option.choices)]
            wrong += [str(c) for c in option.choices if not isinstance(c, str)]  # "True" for True
        for value in wrong:
            with pytest.raises(OptionError):
                pipeline.normalise_options({option.name: value})
        default = option.default
        text = {True: "true", False: "false"}.get(default, default) if isinstance(default, bool) else default
        text = json.dumps(text) if option.kind == "dict" else str(text)
        assert option.from_text(text) == default, (language, option.name, text)
        assert pipeline.normalise_options({option.name: default})[option.name] == default


def test_the_web_process_parses_one_source_at_a_time():
    """The reproducer and the page read sources on request threads; CPython 3.11's parser fails
    with `SystemError: AST constructor recursion depth mismatch` when two threads parse at once (it
    failed a CI run, in werkzeug's parse of a URL rule). Every parse of the web process waits for
    the one under way: here a reproducer is asked for while another parse holds the parser."""
    import threading

    from compiler import python_ast

    made: list[str | None] = []
    with python_ast.LOCK:
        source = "torch.nn.Linear(2, 2)" + CONVENTION
        asking = threading.Thread(target=lambda: made.append(_script("pytorch", source, {})))
        asking.start()
        asking.join(0.5)
        assert asking.is_alive() and not made, "the reproducer parsed while another parse was under way"
    asking.join(10)
    assert made and made[0] is not None and "torch.nn.Linear(2, 2)" in made[0]


def test_the_test_process_guards_every_parse():
    """In the test process, pytest's assertion rewriter and the tests' own source checks call
    ast.parse beside the session's background compiles (one CI run failed in test_docs' parse):
    every ast.parse there, whoever calls it, waits for the parse under way."""
    import ast
    import threading

    from compiler import python_ast

    trees: list[ast.AST] = []
    with python_ast.LOCK:
        parsing = threading.Thread(target=lambda: trees.append(ast.parse("x = 1")))
        parsing.start()
        parsing.join(0.5)
        assert parsing.is_alive() and not trees, "ast.parse ran while another parse held the parser"
    parsing.join(10)
    assert isinstance(trees[0].body[0], ast.Assign)
