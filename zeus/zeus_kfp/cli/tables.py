"""Tables that fit the terminal: columns dropped by importance, the essential ones never cut.

Why: rich shrinks every column of a table wider than the terminal and cuts cells to an
ellipsis ("re…", "0.…"), so at 80 columns a trial table said nothing. Here each table lists
its columns in order of importance; the essential ones (ids, batch size, power limit, cost,
status) are never wrapped or cut, and the optional ones are dropped from the least important
until the table fits, with a line saying which were hidden and that `--wide` shows them.
`--wide` prints every column at full width (lines as long as they need), for machines and
wide terminals; `--json` (where a command has it) is the machine-readable form.

Output to a pipe or a file has no colours or other ANSI codes: rich's Console finds out itself
(`Console()` checks whether stdout is a terminal), so every command prints through `console()`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


@dataclass(frozen=True)
class Column:
    """One column: its header, alignment, and whether it is essential (never dropped, wrapped or cut)."""

    header: str
    keep: bool = False
    justify: str = "right"


def console(*, wide: bool = False, stderr: bool = False) -> Console:
    """The Console every command prints through (no highlighting of numbers: tables carry units). Its
    file is bound now, so what it prints still reaches the terminal while a local run redirects
    sys.stdout into kfp.local's log (pipelines.local)."""
    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=wide)


SEPARATOR = 3  # between two columns: a space of padding, the (blank) rule, a space of padding


def natural_width(header: str, cells: Sequence[str]) -> int:
    """A column's narrowest width with no cell wrapped or cut; its header may wrap at spaces."""
    return max([len(c) for c in cells] + [max((len(w) for w in header.split()), default=0)])


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], shown: list[int], width: int | None) -> list[int]:
    """Each shown column's width: its natural width, then as much of its one-line header as the
    room left allows (headers left to right), so a table wraps headers only when it must."""
    widths = [natural_width(columns[i].header, [row[i] for row in rows]) for i in shown]
    spare = None if width is None else width - sum(widths) - SEPARATOR * (len(shown) - 1)
    for k, i in enumerate(shown):
        grow = max(len(columns[i].header) - widths[k], 0)
        if spare is not None:
            grow = min(grow, spare)
            spare -= grow
        widths[k] += grow
    return widths


def fitted(
    title: str,
    columns: Sequence[Column],
    rows: Iterable[Sequence[str]],
    width: int | None,
) -> tuple[Table, list[str]]:
    """The table of `rows` (cells as text, in `columns` order, most important first) that fits `width`
    (None: every column), and the headers of the columns it dropped to fit. No cell is ever wrapped or
    cut: optional columns are dropped instead, the least important first."""
    rows = [list(row) for row in rows]
    natural = [natural_width(col.header, [row[i] for row in rows]) for i, col in enumerate(columns)]
    # An optional column with no value in any row says nothing: left out, and not reported as hidden.
    empty = {i for i, col in enumerate(columns) if not col.keep and rows and all(r[i] in ("", "-") for r in rows)}
    shown = [i for i in range(len(columns)) if i not in empty]
    optional = [i for i in shown if not columns[i].keep]
    while width is not None and optional and sum(natural[i] for i in shown) + SEPARATOR * (len(shown) - 1) > width:
        shown.remove(optional.pop())
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, w in zip(shown, _widths(columns, rows, shown, width), strict=True):
        table.add_column(columns[i].header, justify=columns[i].justify, min_width=w, max_width=w)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table, [columns[i].header for i in range(len(columns)) if i not in shown and i not in empty]


def print_table(
    out: Console,
    title: str,
    columns: Sequence[Column],
    rows: Iterable[Sequence[str]],
    *,
    wide: bool = False,
) -> None:
    """Print the fitted table, and which columns it hid (if any) with how to see them."""
    table, hidden = fitted(title, columns, rows, None if wide else out.width)
    out.print(title, markup=False, soft_wrap=True)
    if wide:
        width = Measurement.get(out, out.options, table).maximum
        out.print(table, width=max(width, out.width), soft_wrap=True)
    else:
        out.print(table)
    if hidden:
        out.print(f"  (hidden at this width: {', '.join(hidden)}; --wide shows all)", markup=False)
