"""One header line in front of an object's body, so that a read checks the exact bytes before parsing.

The form is `zeus-kfp <kind> <crc32 of the body, 8 hex digits> <body length>\\n<body>`. A reader
checks the length and the CRC-32 first and only then parses: garbled bytes are refused before any
parser (JSON, Arrow IPC) sees them, and the check costs one pass of zlib over the body. The store
uses it for its kept folds (kind "tally"), its small tables (kind "arrow": records, job specs,
phases; schemas.encode) and its snapshots' names objects (kind "names"). A checksum against
accidental damage, which is all a store's objects need, not a signature.

Kept folds, names objects and import manifests put a line of JSON (what the rest is) in front of
bytes of their own: `frame_headed` / `unframe_headed`. JSON as `json.dumps` writes it never holds a
raw newline, so the first newline of the body ends the head. Names objects and import manifests keep
names one per line (`as_lines`), and ask for one by a search of those bytes (`has_line`).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

PREFIX = b"zeus-kfp "
HEADER_MAX = 64  # the header line is well under this; a longer one is not ours


def frame(kind: bytes, body: bytes) -> bytes:
    return b"%s%s %08x %d\n%s" % (PREFIX, kind, zlib.crc32(body), len(body), body)


def is_framed(kind: bytes, data: bytes) -> bool:
    """Whether `data` starts like an object `frame(kind, ...)` wrote (checked or not)."""
    return data.startswith(PREFIX + kind + b" ")


def unframe(kind: bytes, data: bytes) -> bytes:
    """The body `frame(kind, body)` wrote; ValueError saying what does not hold for anything else."""
    end = data.find(b"\n", 0, HEADER_MAX)
    if end < 0 or not is_framed(kind, data):
        raise ValueError(f"no zeus-kfp {kind.decode()} header")
    fields = data[:end].split(b" ")
    body = data[end + 1 :]
    if len(fields) != 4 or not fields[3].isdigit() or int(fields[3]) != len(body):
        raise ValueError(f"body is {len(body)} bytes, not what the header says (truncated or garbled)")
    if fields[2] != b"%08x" % zlib.crc32(body):
        raise ValueError("checksum mismatch: the content is not what was written")
    return body


def frame_headed(kind: bytes, head: dict[str, Any], body: bytes) -> bytes:
    """A JSON head line, then `body`, framed."""
    return frame(kind, b"%s\n%s" % (json.dumps(head, separators=(",", ":")).encode(), body))


def unframe_headed(kind: bytes, data: bytes) -> tuple[Any, bytes | None]:
    """(head, body) `frame_headed` wrote; body None for a framed body of JSON alone (no line after it).
    ValueError (JSONDecodeError included) for anything else."""
    head, newline, body = unframe(kind, data).partition(b"\n")
    return json.loads(head), (body if newline else None)


def as_lines(items: list[str]) -> bytes:
    """Names one per line, each ending with a newline (names hold no newline: keys.py's patterns)."""
    return b"".join(b"%s\n" % item.encode() for item in items)


def unframe_lines(kind: bytes, data: bytes, count_field: str) -> tuple[Any, bytes]:
    """(head, names) of a `frame_headed` object whose body is `as_lines` names, counted in the head's
    `count_field`; the names with a newline in front, as `has_line` searches them. ValueError when the
    count does not match (or for anything `unframe_headed` refuses)."""
    head, lines = unframe_headed(kind, data)
    count = lines.count(b"\n") if lines is not None else None
    if count != int(head[count_field]):
        raise ValueError(f"{count} names, its header says {head[count_field]}")
    return head, b"\n" + (lines or b"")


def has_line(lines: bytes, item: str) -> bool:
    """Whether `item` is a whole line of `lines` (as_lines' bytes with a newline in front): a search of
    the bytes, with no list of thousands of strings built; never a part of a longer name."""
    return "\n" not in item and b"\n%s\n" % item.encode() in lines
