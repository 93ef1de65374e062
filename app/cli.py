"""Command-line verification: `flask --app wsgi verify bert`."""

import json

import click
from flask import Flask
from flask.cli import with_appcontext

from .extensions import store
from .verification import verify


def _format(report: dict) -> list[str]:
    lines = [f"{report['model']} @ {report['revision']}: {report['status'].upper()}"]
    if report["status"] == "error":
        return [*lines, f"  {report['message']}"]
    tol = report["tolerance"]
    lines.append(f"  tolerance: rtol {tol['rtol']:g}, atol {tol['atol']:g} ({tol['source']})")
    for case in report["cases"]:
        lines.append(f"  case {case['id']}: {case['status']}")
        for v in case["values"]:
            diff = v.get("max_abs_diff")
            shown = "n/a" if diff is None else f"{diff:.2e}"
            lines.append(f"    [{v['status']:6}] {v['kind']:6} {v['label']}  max |diff| {shown}")
    for check in report["checks"]:
        lines.append(f"  check [{check['status']:6}] {check['name']}")
    env = report["environment"]
    lines.append(f"  torch {env['torch']} on python {env['python']}, {report['duration_seconds']:.2f} s")
    return lines


@click.command("verify")
@with_appcontext
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
def verify_command(slug: str, as_json: bool) -> None:
    """Re-execute SLUG's recipe and compare it with its recording; exit 1 unless it passes."""
    model = store.get(slug)
    if model is None:
        raise click.ClickException(store.why_missing(slug))
    report = verify(model)
    click.echo(json.dumps(report, indent=2) if as_json else "\n".join(_format(report)))
    if report["status"] != "passed":
        raise SystemExit(1)


def register(app: Flask) -> None:
    app.cli.add_command(verify_command)
