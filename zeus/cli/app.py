"""The `zeus-kfp` Typer app that the command modules attach to, and its one error handler.

Every command runs inside `ZeusGroup.invoke`, which turns whatever a command raises into one
line on stderr and an exit code (zeus.cli.errors); usage errors (an unknown option, a bad
value Click itself checks) are one line too. The global `--debug` shows the traceback instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import zeus
from zeus.cli.errors import describe, one_line


def _usage_line(err: typer.TyperException) -> str:
    """A usage error (Click's, as Typer vendors it) as one line, with where to read more."""
    ctx = getattr(err, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"error: {one_line(err.format_message())}{where}"


class ZeusGroup(TyperGroup):
    """The app's Click group: one error handler for every command (see module doc)."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exits, usage errors: main() shows them
            raise
        except (Exception, KeyboardInterrupt) as err:
            if ctx.params.get("debug"):
                raise
            code, line = describe(err)
            typer.echo(line, err=True)
            raise typer.Exit(code) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # `zeus-kfp` alone: the help text, as Click shows it
                err.show()  # type: ignore[attr-defined]
            else:
                typer.echo(_usage_line(err), err=True)
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


app = typer.Typer(
    name="zeus-kfp",
    cls=ZeusGroup,
    help=(
        "Energy-optimal recurring training on Kubeflow Pipelines (after Zeus, NSDI'23): "
        "a batch-size bandit plus just-in-time GPU power-limit profiling."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the full traceback when a command fails unexpectedly.")
    ] = False,
) -> None:
    """Energy-optimal recurring training on Kubeflow Pipelines (after Zeus, NSDI'23): a batch-size
    bandit plus just-in-time GPU power-limit profiling."""


@app.command()
def version() -> None:
    """Print the installed zeus-kfp version."""
    typer.echo(zeus.__version__)
