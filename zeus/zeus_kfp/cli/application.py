"""The `zeus-kfp` Typer app that the command modules attach to, and its one error handler.

Every command runs inside `ZeusGroup.invoke`, which turns whatever a command raises into one
line on stderr and an exit code (zeus_kfp.cli.exits); usage errors (an unknown option, a bad
value Click itself checks) are one line too. The global `--debug` shows the traceback instead.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import zeus_kfp
from zeus_kfp.cli.exits import describe, one_line


def _usage_line(err: typer.TyperException) -> str:
    """A usage error (Click's, as Typer vendors it) as one line, with where to read more."""
    ctx = getattr(err, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"error: {one_line(err.format_message())}{where}"


def reader_went_away() -> None:
    """The reader of our output closed it (`zeus-kfp ... | head`): stop quietly, as rich does for its own output
    (and Python's docs advise): what is left goes to /dev/null so the exit's flush cannot fail again; exit 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(1)


RICH_HELP_MIN_COLUMNS = 100  # below this, rich's option tables cut long words ("mlpipeline-minio-ar…")


def plain_help() -> bool:
    """Whether --help is Click's plain text: on a terminal (or COLUMNS) narrower than RICH_HELP_MIN_COLUMNS,
    where rich's panels would cut defaults and names short; Click's text wraps at words and cuts nothing."""
    return shutil.get_terminal_size().columns < RICH_HELP_MIN_COLUMNS


class ZeusGroup(TyperGroup):
    """The app's Click group: one error handler for every command (see module doc), and --help that cuts
    nothing at any width (`plain_help`)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and plain_help():
            command.rich_markup_mode = None  # type: ignore[attr-defined]
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if plain_help():
            self.rich_markup_mode = None
        super().format_help(ctx, formatter)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exits, usage errors: main() shows them
            raise
        except BrokenPipeError:
            reader_went_away()
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
    typer.echo(zeus_kfp.__version__)
