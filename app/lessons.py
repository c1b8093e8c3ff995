"""The lessons of the examples gallery, read from data files: `examples/<slug>/lesson.toml` plus the
source file(s) it names. Adding a lesson is adding a directory; nothing here names a lesson.

lesson.toml:

    title = "Pointwise operations fuse into one kernel"
    topic = "Inductor"               # the gallery's section
    order = 10                       # position in the gallery (then the slug)
    language = "pytorch"             # a registered language
    source = "source.py"             # file beside lesson.toml
    first_stage = "inductor.output_code"   # a stage key, or a key without its :qualifier
    explanation = "Two to four sentences."
    [options]                        # the pipeline's options (validated by its schema)
    [compare]                        # optional: the same lesson with another option set or source
    title = "with max-autotune"
    language = "jax"                 # B's language (default: the lesson's; another one starts from its defaults)
    options = {mode = "max-autotune"}  # B's options: the lesson's, updated by these
    source = "fixed.py"              # B's source (default: the lesson's)
    stage = "inductor.output_code"   # the stage of A to diff first; `stage_b` the one of B (default: same)
    [[check]]                        # what tests/test_examples.py asserts on the compiled lesson

The web process reads these files only; it never runs them (they are compiled like any request).
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from compiler import registry
from compiler.model import Request
from compiler.pipeline import OptionError

# The repository's examples/ directory (setting examples_dir overrides it).
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_FIELDS = {"title", "topic", "order", "language", "source", "first_stage", "explanation", "options", "compare",
           "check"}
_COMPARE_FIELDS = {"title", "language", "options", "source", "stage", "stage_b", "explanation"}


class LessonError(ValueError):
    """A lesson directory that does not describe a lesson; the message names the file."""


@dataclass(frozen=True)
class Compare:
    """The lesson's second job (B) and the stages to diff first."""

    title: str
    request: Request
    stage: str
    stage_b: str
    explanation: str = ""


@dataclass(frozen=True)
class Lesson:
    slug: str
    title: str
    topic: str
    order: int
    request: Request
    source_file: str
    first_stage: str
    explanation: str
    compare: Compare | None = None
    checks: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    @property
    def language(self) -> str:
        return self.request.language

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "slug": self.slug, "title": self.title, "topic": self.topic, "language": self.language,
            "explanation": self.explanation, "first_stage": self.first_stage, "source": self.request.source,
            "options": self.request.options, "url": f"/examples/{self.slug}", "compare": None}
        if self.compare:
            out["compare"] = {"title": self.compare.title, "url": f"/examples/{self.slug}/compare",
                              "language": self.compare.request.language, "source": self.compare.request.source,
                              "options": self.compare.request.options, "stage": self.compare.stage,
                              "stage_b": self.compare.stage_b, "explanation": self.compare.explanation}
        return out


def _read_source(directory: str, name: Any, where: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise LessonError(f"{where}: source must name a file beside lesson.toml, not {name!r}")
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise LessonError(f"{where}: cannot read its source {name!r}: {e.strerror}") from None


def _request(language: str, source: str, options: Any, where: str) -> Request:
    if not isinstance(options, dict):
        raise LessonError(f"{where}: options must be a table")
    try:
        normalised = registry.get(language).normalise_options(options)
    except OptionError as e:
        raise LessonError(f"{where}: {e}") from None
    # what the page's editor would send: the file's text with Unix line ends
    return Request(language=language, source=source.replace("\r\n", "\n"), options=normalised)


def _text(data: dict[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise LessonError(f"{where}: {name} must be a non-empty string")
    return " ".join(value.split())


def read_lesson(directory: str) -> Lesson:
    """One lesson from its directory; LessonError naming the file when it is not one."""
    slug = os.path.basename(os.path.normpath(directory))
    where = os.path.join("examples", slug, "lesson.toml")
    if not _SLUG.match(slug):
        raise LessonError(f"{where}: a lesson's directory name is its slug: lowercase letters, digits and '-'")
    try:
        with open(os.path.join(directory, "lesson.toml"), "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise LessonError(f"{where}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise LessonError(f"{where}: {e}") from None
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise LessonError(f"{where}: unknown field {unknown[0]!r}; known: {', '.join(sorted(_FIELDS))}")
    language = data.get("language")
    if language not in registry.keys():
        raise LessonError(f"{where}: unknown language {language!r}")
    order = data.get("order", 1000)
    if not isinstance(order, int):
        raise LessonError(f"{where}: order must be an integer")
    source = _read_source(directory, data.get("source"), where)
    request = _request(language, source, data.get("options", {}), where)
    first_stage = _text(data, "first_stage", where)
    compare = None
    if "compare" in data:
        spec = data["compare"]
        if not isinstance(spec, dict):
            raise LessonError(f"{where}: compare must be a table")
        bad = sorted(set(spec) - _COMPARE_FIELDS)
        if bad:
            raise LessonError(f"{where}: unknown compare field {bad[0]!r}; known: {', '.join(sorted(_COMPARE_FIELDS))}")
        other = _read_source(directory, spec["source"], where) if "source" in spec else source
        language_b = spec.get("language", language)
        if language_b not in registry.keys():
            raise LessonError(f"{where}: unknown compare language {language_b!r}")
        options = {**(request.options if language_b == language else {}), **spec.get("options", {})}
        b = _request(language_b, other, options, where + " [compare]")
        if b == request:
            raise LessonError(f"{where}: compare asks for the lesson's own request again")
        stage = _text(spec, "stage", where + " [compare]") if "stage" in spec else first_stage
        compare = Compare(title=_text(spec, "title", where + " [compare]"), request=b, stage=stage,
                          stage_b=_text(spec, "stage_b", where) if "stage_b" in spec else stage,
                          explanation=" ".join(str(spec.get("explanation", "")).split()))
    checks = data.get("check", [])
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise LessonError(f"{where}: check must be an array of tables ([[check]])")
    return Lesson(slug=slug, title=_text(data, "title", where), topic=_text(data, "topic", where), order=order,
                  request=request, source_file=data["source"], first_stage=first_stage,
                  explanation=_text(data, "explanation", where), compare=compare, checks=tuple(checks))


@lru_cache(maxsize=8)
def load(directory: str = DEFAULT_DIR) -> tuple[Lesson, ...]:
    """Every lesson under `directory`, in gallery order (read once per process: they are files of
    the installation, not of the store)."""
    if not os.path.isdir(directory):
        return ()
    lessons = [read_lesson(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
               if os.path.isfile(os.path.join(directory, name, "lesson.toml"))]
    return tuple(sorted(lessons, key=lambda lesson: (lesson.order, lesson.slug)))


def by_slug(lessons: tuple[Lesson, ...], slug: str) -> Lesson | None:
    return next((lesson for lesson in lessons if lesson.slug == slug), None)


def for_request(lessons: tuple[Lesson, ...], request: Request) -> tuple[Lesson, str] | None:
    """The lesson a job's request belongs to, and which side of it ("a": the lesson itself, "b": its
    compare variant), so a permalink of a lesson's job shows the lesson."""
    for lesson in lessons:
        if lesson.request == request:
            return lesson, "a"
        if lesson.compare and lesson.compare.request == request:
            return lesson, "b"
    return None


def for_pair(lessons: tuple[Lesson, ...], a: Request, b: Request) -> Lesson | None:
    """The lesson whose comparison is exactly A against B."""
    return next((lesson for lesson in lessons
                 if lesson.compare and lesson.request == a and lesson.compare.request == b), None)
