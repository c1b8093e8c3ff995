"""One way to read part of a stage, for the page (a pane a page at a time), the JSON API and MCP (a
line range): the lines asked for and no more, read from the store's chunks that hold them, bounded
in count, with the source-map pairs of those lines. The page and MCP used to page and slice each
their own way."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import ErrorKind, Refused
from compiler.model import Stage
from service.store import Store


@dataclass(frozen=True)
class StageLines:
    """Lines `first`..`last` (1-based, inclusive) of a stage of `lines` lines."""

    stage: Stage
    lines: int
    first: int
    last: int
    text: str

    @property
    def whole(self) -> bool:
        return self.first <= 1 and self.last >= self.lines

    def source_map(self) -> list[list[int]]:
        """The stage's source-map pairs ([line of the stage, line of the source]) of these lines."""
        return [pair for pair in self.stage.source_map if self.first <= pair[0] <= self.last]


def head(store: Store, job_id: str, key: str) -> tuple[Stage, int]:
    """The stage and its number of lines, no text; Refused(NotFound) when the job has no such stage."""
    found = store.stage_page(job_id, key, 0, 0)
    if found is None:
        raise Refused(ErrorKind.NotFound, f"job {job_id!r} has no stage {key!r}")
    return found[0], found[1]


def lines(store: Store, job_id: str, key: str, first: int, last: int | None, most: int,
          known: tuple[Stage, int] | None = None) -> StageLines:
    """Lines `first`..`last` (the stage's end when None), at most `most` of them; Refused when the
    stage does not exist or `first` is past its end. `known`: its `head`, when the caller read it."""
    stage, count = known or head(store, job_id, key)
    first = max(first, 1)
    if first > max(count, 1):
        raise Refused(ErrorKind.RequestError, f"stage {stage.key} has {count} lines; line {first} is past its end")
    last = min(count if last is None else last, count, first + max(most, 1) - 1)
    _, _, text = store.stage_page(job_id, stage.key, first - 1, max(last - first + 1, 0))
    return StageLines(stage, count, first, max(last, first - 1), text)


def page(store: Store, job_id: str, key: str, number: int, per_page: int,
         known: tuple[Stage, int] | None = None) -> StageLines:
    """Page `number` (from 1) of `per_page` lines; Refused past the last page."""
    stage, count = known or head(store, job_id, key)
    pages = max(-(-count // per_page), 1)
    if number > pages:
        raise Refused(ErrorKind.NotFound, f"stage {stage.key!r} has {pages} pages")
    return lines(store, job_id, stage.key, (max(number, 1) - 1) * per_page + 1, None, per_page, (stage, count))
