"""A stage's text as compressed chunks cut at line boundaries, so one page of a 20 MB artifact is
read (and decompressed) without the rest of it.

Lines are what the viewers number: `text.split("\\n")`. Chunk `n` holds lines
`first_line .. first_line + line_count - 1` (0-based), each chunk but the last ending with the
newline that separates it from the next, so the chunks joined are the text again.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

COMPRESSION_LEVEL = 6


@dataclass(frozen=True)
class Chunk:
    n: int
    first_line: int
    line_count: int
    data: bytes  # zlib-compressed UTF-8

    def text(self) -> str:
        return zlib.decompress(self.data).decode("utf-8")


def line_count(text: str) -> int:
    return text.count("\n") + 1


def split(text: str, chunk_bytes: int) -> list[Chunk]:
    """The text in chunks of about `chunk_bytes` (UTF-8), each cut after a newline (a single line
    longer than that is one chunk of its own)."""
    encoded = text.encode("utf-8")
    chunks: list[Chunk] = []
    start, first_line = 0, 0
    while True:
        end = len(encoded) if len(encoded) - start <= chunk_bytes else encoded.rfind(b"\n", start, start + chunk_bytes)
        if end < start + 1 and end != len(encoded):  # no newline inside the window: cut at the next one
            end = encoded.find(b"\n", start + chunk_bytes)
            end = len(encoded) if end < 0 else end
        end = end if end == len(encoded) else end + 1  # the newline stays with its line
        piece = encoded[start:end]
        lines = piece.count(b"\n") + (1 if end == len(encoded) else 0)
        chunks.append(Chunk(len(chunks), first_line, lines, zlib.compress(piece, COMPRESSION_LEVEL)))
        first_line += lines
        start = end
        if start >= len(encoded):
            break
    return chunks


def join(chunks: list[Chunk]) -> str:
    return "".join(c.text() for c in sorted(chunks, key=lambda c: c.n))


def page(chunks: list[Chunk], first: int, count: int) -> str:
    """Lines `first .. first + count - 1` (0-based) out of the chunks that hold them (consecutive
    chunks, as Store.stage_page selects them), without the newline after the last."""
    chunks = sorted(chunks, key=lambda c: c.n)
    if not chunks:
        return ""
    lines = "".join(c.text() for c in chunks).split("\n")
    offset = first - chunks[0].first_line
    return "\n".join(lines[max(offset, 0):max(offset, 0) + count])
