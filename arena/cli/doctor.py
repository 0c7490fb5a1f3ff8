"""``arena doctor``: what this machine gives the services that need it (the ONNX sandbox's layers)."""

from __future__ import annotations

import typer
from rich.table import Table

from arena.cli.console import console, fail


def doctor() -> None:
    """Check this machine: which confinement layers ONNX worker processes get here, and whether
    ARENA_ONNX_CONFINEMENT lets them run models (exit status 1 if not)."""
    from agents.onnx_agents.sandbox import confinement_report  # a throwaway confined process

    try:
        report = confinement_report()
    except ValueError as exc:  # an ARENA_ONNX_CONFINEMENT that is neither mode
        fail(str(exc))
    table = Table(title=f"ONNX sandbox (ARENA_ONNX_CONFINEMENT={report['mode']})")
    table.add_column("layer")
    table.add_column("active")
    table.add_column("detail")
    for name, layer in report.get("layers", {}).items():
        table.add_row(name, "yes" if layer["active"] else "[red]no[/red]", layer["detail"])
    console.print(table)
    if report.get("refused"):
        fail(report["refused"], code=1)
    console.print("ONNX models can run here.")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
