"""`zeus-kfp fleet`: what zeus-kfp saved across the jobs of a store, for the platform team.

Per job: recurrences, energy used, the saving against the default configuration (the very figure `show` prints,
zeus_kfp.report.savings), energy, cost and GPU-hours saved, CO2 avoided, the bandit's stage and failures; a
total row. `--json` for machines, `--plot FILE` for the cumulative plot, `--serve PORT` for Prometheus
(zeus_kfp.fleet.exporter). The same as a KFP artifact: components/fleet.py, pipelines/fleet.py.
"""

from __future__ import annotations

import json
import threading
from typing import Annotated

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.jobs_cmd import JsonOpt, StoreOpt, WideOpt
from zeus_kfp.cli.stores import open_for_reading
from zeus_kfp.cli.tables import Column, console, print_table

DEFAULT_CARBON_INTENSITY = 480.0  # zeus_kfp.fleet.figures' (it loads pandas, so not imported); a test checks
WHEN = "An ISO 8601 date or time (UTC unless it says so) or a span ago (90m, 12h, 30d, 2w)"
FLEET_COLUMNS = [
    Column("job", keep=True, justify="left"),
    Column("stage", keep=True, justify="left"),
    Column("recurrences", keep=True),
    Column("energy used"),
    Column("saving", keep=True),
    Column("energy saved", keep=True),
    Column("cost saved"),
    Column("GPU-hours saved"),
    Column("CO2 avoided"),
    Column("failed trials", keep=True),
    Column("failed energy"),
]


@app.command()
def fleet(
    job: Annotated[
        list[str] | None, typer.Option("--job", help="Only jobs matching this id or pattern (nightly-*); repeatable.")
    ] = None,
    since: Annotated[str | None, typer.Option(help=f"Recurrences that ended from then on. {WHEN}.")] = None,
    until: Annotated[str | None, typer.Option(help=f"Recurrences that ended before then. {WHEN}.")] = None,
    carbon_intensity: Annotated[
        float,
        typer.Option(
            min=0,
            help="Your grid's carbon intensity in gCO2/kWh, for CO2 avoided. Default: the world's electricity in "
            "2023, 480 (Ember, Global Electricity Review 2024).",
        ),
    ] = DEFAULT_CARBON_INTENSITY,
    namespace: Annotated[
        str | None,
        typer.Option(help="The namespace label of the Prometheus metrics. Default: read off the store (private/<ns>)."),
    ] = None,
    store: StoreOpt = None,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Write the cumulative energy saved, per job, as PNG: into a directory as fleet.png, or to a file "
            "(.png added where its name lacks it)."
        ),
    ] = None,
    serve: Annotated[
        int | None,
        typer.Option(min=0, help="Serve Prometheus metrics on this port (/metrics) until stopped; 0: a free port."),
    ] = None,
    address: Annotated[str, typer.Option(help="With --serve: the address to listen on (0.0.0.0 in a pod).")] = (
        "127.0.0.1"
    ),
    refresh: Annotated[float, typer.Option(min=0, help="With --serve: read the store again after S seconds.")] = 60.0,
    wide: WideOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Every job of the store (or those --job matches), over recurrences that ended in [--since, --until): energy
    used, the saving against the default config as `show` gives it (failed runs apart, as waste), energy, cost
    (Zeus's, in J) and GPU-hours saved, CO2 avoided, the bandit's stage and failures, and a total row. A job
    still exploring says so: its saving may be negative until later recurrences pay the exploring back."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.fleet.fleet_markdown import HEADERS, notes, rows, window_text
    from zeus_kfp.fleet.read import parse_when, read_fleet

    opened = open_for_reading(store)
    window = {"since": parse_when("since", since), "until": parse_when("until", until)}

    def read():
        return read_fleet(opened, job or (), carbon_intensity=carbon_intensity, namespace=namespace, **window)

    current = read()
    if plot is not None:
        from zeus_kfp.fleet.plot import plot_fleet  # deferred: matplotlib

        written = plot_fleet(current, plot)
        typer.echo(f"wrote {written}" if written else "no plot: no job has a saving yet", err=True)
    if as_json:
        typer.echo(json.dumps(current.to_dict(), indent=2))
    else:
        out = console(wide=wide)
        assert [c.header for c in FLEET_COLUMNS] == HEADERS
        print_table(out, f"fleet of {opened.uri}: {window_text(current)}", FLEET_COLUMNS, rows(current), wide=wide)
        for line in notes(current):
            out.print(line, markup=False, soft_wrap=True)
    if serve is not None:
        _serve(read, current, serve, address, refresh)


def _serve(read, current, port: int, address: str, refresh: float) -> None:
    """Serve the metrics until SIGINT/SIGTERM; says where on stderr (a port of 0 gets a free one)."""
    from zeus_kfp.fleet.exporter import FleetCollector, serve

    server, _ = serve(FleetCollector(read, refresh_s=refresh, first=current), port, address)
    typer.echo(f"serving Prometheus metrics at http://{address}:{server.server_port}/metrics", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    finally:
        server.shutdown()
