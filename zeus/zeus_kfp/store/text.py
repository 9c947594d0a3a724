"""Free text as the store can keep it: valid UTF-8, and no longer than a writer's limit.

Why: Arrow holds text as UTF-8, so a string with a lone surrogate (a file name that is not UTF-8, as
`os.fsdecode` gives it: "caf\\udce9.csv") passes JSON and then fails every read of the job; and a trial's reason
is whatever its script printed. What a trial or a script hands in is made storable here rather than refused, so
its measured figures are always stored: lone surrogates escaped (`\\udce9`), an over-long text cut in the middle
(a traceback's end says the most), each saying so. The same function makes an entry an older zeus-kfp wrote
readable (docs/STORE.md, "Entry kinds"), so a retried writer compares equal across an upgrade.
"""

from __future__ import annotations

MAX_TEXT = 10_000  # characters of a free-text field a writer stores (reasons, stages): a person's sentence, not a file
ESCAPED_NOTE = " [zeus-kfp: characters that were not UTF-8 are shown as \\u escapes]"
KEPT_HEAD = 2_000  # of a cut text, the characters kept from its start (the rest from its end)


def is_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (no lone surrogates): what Arrow's string columns need."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """`text` with every lone surrogate written as its escape (`\\udce9`): what a message can print."""
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def escaped(text: str) -> str:
    """`text` with every lone surrogate written as its escape, saying so; unchanged if valid UTF-8."""
    return text if is_utf8(text) else printable(text) + ESCAPED_NOTE


def storable(text: str, limit: int = MAX_TEXT) -> str:
    """`text` as a writer can store it: escaped (above), then, if longer than `limit` characters, its start and its
    end with a note of how much was cut between them. Storable text comes back unchanged."""
    text = escaped(text)
    if len(text) <= limit:
        return text
    note = ""
    for _ in range(3):  # the note's own length is part of what is cut: settle it
        note = f" [zeus-kfp: {len(text) - limit + len(note):,} characters cut here] "
    head = min(KEPT_HEAD, limit // 2)
    return text[:head] + note + text[len(text) - (limit - head - len(note)) :]
