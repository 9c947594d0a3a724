"""The `zeus-kfp` Typer app that the command modules attach to."""

import typer

import zeus

app = typer.Typer(
    name="zeus-kfp",
    help=(
        "Energy-optimal recurring training on Kubeflow Pipelines (after Zeus, NSDI'23): "
        "a batch-size bandit plus just-in-time GPU power-limit profiling."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def version() -> None:
    """Print the installed zeus-kfp version."""
    typer.echo(zeus.__version__)
