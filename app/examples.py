"""The examples gallery: /examples lists the lessons (app/lessons.py reads them from examples/), and
/examples/<slug> opens one as the permalink of its request, compiling it the first time."""
from __future__ import annotations

from urllib.parse import quote

from flask import Blueprint, abort, jsonify, redirect, render_template, request

import viewers.code
from app import lessons as lesson_files
from app import services
from app.http_policy import client_address
from compiler import registry
from compiler.model import Request

bp = Blueprint("examples", __name__)


def offered() -> tuple[lesson_files.Lesson, ...]:
    """The lessons of this server's languages, in gallery order."""
    svc = services()
    every = lesson_files.load(svc.web.examples_dir or lesson_files.DEFAULT_DIR)
    return tuple(lesson for lesson in every if lesson.language in svc.jobs.config.languages)


def _lesson(slug: str) -> lesson_files.Lesson:
    lesson = lesson_files.by_slug(offered(), slug)
    if lesson is None:
        abort(404, f"no lesson {slug!r}")
    return lesson


def _topics(lessons: tuple[lesson_files.Lesson, ...]) -> dict[str, list[lesson_files.Lesson]]:
    topics: dict[str, list[lesson_files.Lesson]] = {}
    for lesson in lessons:
        topics.setdefault(lesson.topic, []).append(lesson)
    return topics


def changed_options(req: Request) -> dict:
    """The options a request sets away from its pipeline's defaults (what a lesson is about)."""
    defaults = {o.name: o.default for o in registry.get(req.language).options}
    return {k: v for k, v in req.options.items() if defaults.get(k) != v}


def _submit(*requests: Request) -> list:
    """The jobs answering a lesson's requests: the stored ones, or compiled now, admitted like any
    request (a lesson compiled before creates no job, so it counts against nobody's rate)."""
    return [job for job, _ in services().admission.submit(list(requests), client_address())]


@bp.get("/examples")
def gallery():
    lessons = offered()
    sources = {lesson.slug: viewers.code.render(lesson.request.source, registry.get(lesson.language).lexer)
               for lesson in lessons}
    return render_template("gallery.html", topics=_topics(lessons), count=len(lessons), sources=sources,
                           titles={p.key: p.title for p in map(registry.get, services().jobs.config.languages)},
                           changed={lesson.slug: changed_options(lesson.request) for lesson in lessons})


@bp.get("/examples.json")
def gallery_json():
    return jsonify({"lessons": [lesson.to_json() for lesson in offered()]})


@bp.get("/examples/<slug>")
def open_lesson(slug: str):
    """The lesson's permalink (/z/<id>), made now if it is the lesson's first opening; its page
    opens the lesson's first stage. `?embed=1` is kept for slides."""
    lesson = _lesson(slug)
    job, = _submit(lesson.request)
    link_id = services().jobs.shortlink(job)
    embed = "?embed=1" if request.args.get("embed") == "1" else ""
    return redirect(f"/z/{link_id}{embed}#stage={quote(lesson.first_stage, safe='')}", code=303)


@bp.get("/examples/<slug>/compare")
def compare_lesson(slug: str):
    """The lesson side by side with its variant (/c/<id>), both compiled if they were not."""
    lesson = _lesson(slug)
    if lesson.compare is None or lesson.compare.request.language not in services().jobs.config.languages:
        abort(404, f"lesson {slug!r} has no comparison")
    a, b = _submit(lesson.request, lesson.compare.request)
    return redirect(f"/c/{services().jobs.comparison(a, b)}", code=303)
