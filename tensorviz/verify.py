"""`tensorviz verify <model page or API URL>`: a server's recording checked on the reader's own machine.

    tensorviz verify http://127.0.0.1:8000/models/lenet            # a model page, or /api/models/lenet
    tensorviz verify http://127.0.0.1:8000/models/lenet --json     # the report as JSON
    tensorviz verify http://127.0.0.1:8000/models/gcn --retrain    # train it again too, and compare the weights
    tensorviz verify http://127.0.0.1:8000/models/lenet --share     # and post the summary to the server's history

The trust model: the recipe that runs is the reader's own (this project's recipes/, or --recipes DIR); the server
gives only data (its manifest, weights and data as safetensors, JSON and SVG, never a pickle), each file checked
against the hash its manifest records; and a server whose recipe files are not byte-identical to the reader's is
refused, naming them, before anything runs. --trust-server-code runs the server's Python instead, after saying so.

It fetches the model's manifest and every file the manifest records, from the server's own origin, each within
--max-bytes and everything within one --timeout; refuses any file whose sha256 is not the manifest's (naming it);
replays the recipe in a fresh, isolated process (`python -I -m tensorviz.replay`: the standard library, the
installed packages and the recipe package on its path, no downloaded folder) with the recorded seed and settings,
and compares every recorded value by the server's own rules (app/domain/compare.py). With --retrain it also runs the
recipe's train.py as the server's retraining does (app/compute/retraining.py) and compares every tensor with the
fetched weights. The report is made here; the download folder is removed however the check ends (but a SIGKILL).

Exit status: 0 when every value (and every retrained tensor) holds, 1 when one does not, 2 when it could not
check (a file refused, the server out of reach or malformed, the recipe failed to run).
"""

import argparse
import getpass
import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from app.compute.errors import RecipeError
from app.compute.messages import Failure, Reply, read_reply
from app.compute.retraining import RetrainCall, retrain
from app.domain.compare import case_lines, compare_replay, recorded_states
from app.domain.history import retraining_entry, verification_entry
from app.domain.schema import ManifestError, validate_manifest
from app.services.config import PROJECT_ROOT

from .fetching import Refused, Server

REPLAY_SECONDS = 600.0
RETRAIN_SECONDS = 1800.0
DEADLINE_SECONDS = 2700.0  # the whole check, fetches, replay and retraining included
MAX_BYTES = 2**30  # the most any one file may hold
MODEL_PATH = re.compile(r"^(?P<prefix>.*?)/(?:api/)?models/(?P<slug>[a-z0-9][a-z0-9-]*)(?:/|$)")
PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
CODE = (".py", ".toml", ".txt")  # the recipe's own files: the reader's run, the server's only compared
DATA = (".safetensors", ".json", ".svg")  # what the server may give: read as data, never run nor unpickled
RECIPES = PROJECT_ROOT / "recipes"  # the reader's own copy of the recipes, where the package was installed from


def target(url: str) -> tuple[str, str]:
    """The server's base URL and the model's slug, from a model page's or the API's URL."""
    parts = urllib.parse.urlsplit(url)
    found = MODEL_PATH.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or found is None:
        raise Refused(f"{url!r} is not a model page or API URL (like http://host/models/<slug>)")
    return f"{parts.scheme}://{parts.netloc}{found['prefix']}", found["slug"]


def fetched_files(server: Server, manifest: dict, folder: Path) -> list[dict]:
    """Every file the manifest records, fetched from the server's origin into `folder` and checked: Refused naming
    every file whose sha256 is not the manifest's, whose name is not a plain file name, or that is neither the
    recipe's code nor data this verifier reads, before anything runs."""
    checked, refused = [], []
    for name, recorded in manifest["files"].items():
        if not PLAIN_NAME.match(name):
            raise Refused(f"{name!r}: the manifest names a file outside its folder; refused, nothing was run")
        if not name.endswith(CODE + DATA):
            raise Refused(f"{name}: neither the recipe's code nor data this verifier reads (safetensors, JSON, SVG): "
                          "refused, nothing was run")
        if recorded["bytes"] > server.max_bytes:
            raise Refused(f"{name}: {recorded['bytes']:,} bytes, more than the {server.max_bytes:,} allowed "
                          "(--max-bytes); refused, nothing was run")
        body = server.get(server.url(recorded["url"]))
        digest = hashlib.sha256(body).hexdigest()
        if digest != recorded["sha256"]:
            refused.append(f"{name} (sha256 {digest}, the manifest's {recorded['sha256']})")
            continue
        (folder / name).write_bytes(body)
        checked.append({"name": name, "sha256": digest, "bytes": len(body)})
    if refused:
        raise Refused(f"the server sent {len(refused)} file{'s' * (len(refused) > 1)} whose sha256 is not the "
                      f"manifest's: {'; '.join(refused)}; refused, nothing was run")
    return checked


def readers_recipe(fetched: Path, ours: Path, slug: str, into: Path) -> Path:
    """The recipe folder that runs: the reader's own (`ours`), with the server's data (weights, datasets) laid in.
    Refused, naming each, where a recipe file of the server's is not byte-identical to the reader's."""
    if not ours.is_dir():
        raise Refused(f"{ours} is no recipe folder of {slug}: give your copy of the recipes with --recipes DIR, or run "
                      "the server's own code with --trust-server-code")
    differ = [path.name for path in sorted(fetched.iterdir()) if path.name.endswith(CODE)
              and (not (ours / path.name).is_file() or (ours / path.name).read_bytes() != path.read_bytes())]
    if differ:
        raise Refused(f"the server's recipe is not your copy in {ours}: {', '.join(differ)} differ"
                      f"{'s' * (len(differ) == 1)}; nothing was run. Verify with a copy of the server's release "
                      "(--recipes DIR), or run the server's code with --trust-server-code")
    shutil.copytree(ours, into, ignore=shutil.ignore_patterns("__pycache__"))
    for path in fetched.iterdir():
        if path.name.endswith(DATA):
            shutil.copyfile(path, into / path.name)
    return into


def checked_checkpoint(folder: Path, recorded: dict[str, str]) -> None:
    """The reader's checkpoint folder holds the files the recording was made from: Refused naming the first that
    is missing or another file (or a name outside the folder)."""
    for name, sha256 in recorded.items():
        if not isinstance(name, str) or not PLAIN_NAME.match(name):
            raise Refused(f"{name!r}: the manifest names a checkpoint file outside its folder; refused, nothing was "
                          "run")
        try:
            digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        except OSError as exc:
            raise Refused(f"{name}: the checkpoint folder {folder} has no readable {name} ({exc.strerror})") from None
        if digest != sha256:
            raise Refused(f"{name}: the checkpoint's file has sha256 {digest}, not the {sha256} the recording was "
                          "made from: refused, nothing was run")


def replayed(folder: Path, seed: int, checkpoint: str | None, states: dict, server: Server) -> Reply:
    """The recipe's replay in a fresh, isolated process (-I: no script folder, no user site, no PYTHON* settings on
    its import path), its iterated processes then replayed step by step from the recorded `states`: the worker's
    reply."""
    given = folder.parent / "recorded-states.json"
    given.write_text(json.dumps(states))
    command = [sys.executable, "-I", "-m", "tensorviz.replay", str(folder), str(seed),
               *([checkpoint] if checkpoint else []), "--states", str(given)]
    seconds = min(REPLAY_SECONDS, server.remaining())
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds, cwd=folder.parent)
    except subprocess.TimeoutExpired:
        raise Refused(f"the replay ran past {seconds:g} s and was stopped") from None
    try:
        reply = read_reply(json.loads(done.stdout))
    except (ValueError, TypeError, KeyError):
        raise Refused(f"the replay process ended (exit status {done.returncode}) without a reply: "
                      f"{done.stderr.strip().splitlines()[-1:] or ''}") from None
    if isinstance(reply, Failure):
        raise Refused(f"the recipe failed to replay: {reply.error or reply.words}")
    return reply


def manifest_of(server: Server, slug: str) -> dict:
    """The model's manifest, checked to be one (its types, its references): Refused with where it is not."""
    manifest = server.json(f"{server.base}/api/models/{slug}")
    try:
        validate_manifest(manifest, slug)
    except ManifestError as exc:
        raise Refused(f"the server's manifest of {slug} is malformed: {exc}") from None
    return manifest


def verified(url: str, checkpoint: str | None, retraining: bool, folder: Path, recipes: Path,
             trust_server_code: bool, timeout: float = DEADLINE_SECONDS, max_bytes: int = MAX_BYTES) -> dict:
    """The whole check of the model at `url`, files fetched into `folder`: a report (Refused where none can be
    made)."""
    base, slug = target(url)
    server = Server(base, time.monotonic() + timeout, max_bytes)
    manifest = manifest_of(server, slug)
    if retraining and "train.py" not in manifest["files"]:
        raise Refused(f"{slug} is not trained by its recipe (its manifest records no train.py)")
    recorded_checkpoint = manifest["provenance"].get("checkpoint")
    if recorded_checkpoint and not checkpoint:
        raise Refused(f"{slug} reads a pretrained checkpoint the server does not serve: give its folder with "
                      "--checkpoint")
    if recorded_checkpoint:
        checked_checkpoint(Path(checkpoint), recorded_checkpoint.get("files", {}))
    fetched = folder / "fetched" / slug
    fetched.mkdir(parents=True)
    report: dict = {"model": slug, "revision": manifest.get("revision"), "source": f"{base}/api/models/{slug}",
                    "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "files": fetched_files(server, manifest, fetched)}
    if trust_server_code:
        code = sorted(p.name for p in fetched.iterdir() if p.name.endswith(".py"))
        print(f"WARNING: --trust-server-code: {', '.join(code)} come from {base} and now run on this machine with "
              f"your privileges (user {getpass.getuser()})", file=sys.stderr, flush=True)
        recipe = fetched
    else:
        recipe = readers_recipe(fetched, recipes / slug, slug, folder / "run" / slug)
    report["code"] = "the server's (--trust-server-code)" if trust_server_code else f"yours, from {recipes / slug}"
    seed = manifest["provenance"]["execution"]["seed"]
    reply = replayed(recipe, seed, checkpoint, recorded_states(manifest), server)
    report |= compare_replay(manifest, reply.result)
    report |= {"environment": reply.environment, "compute_seconds": reply.compute_seconds,
               "replay_sha256": hashlib.sha256(reply.result_json.encode()).hexdigest()}
    if retraining:
        try:
            trained = retrain(RetrainCall(recipe, min(RETRAIN_SECONDS, server.remaining())), lambda event: None,
                              lambda: False)
            report["retraining"] = trained.report | {"environment": trained.environment}
        except RecipeError as exc:
            raise Refused(f"the retraining failed: {exc}") from None
        if not report["retraining"]["passed"]:
            report["status"] = "failed"
    return report


def told(report: dict) -> str:
    """The report as a reader reads it: what was fetched and replayed, each case, each check, the verdict."""
    env, summary, tol = report["environment"], report["summary"], report["tolerance"]
    lines = [f"{report['model']} @ {report['revision']} from {report['source']}",
             f"files: {len(report['files'])} fetched, each sha256 the manifest's; the code that ran: {report['code']}",
             f"replayed here in {report['compute_seconds']:.2f} s: Python {env['python']}, torch {env['torch']}, "
             f"{env['cpu']} ({env['cpu_capability']}), seed {env['seed']}"]
    for case in report["cases"]:
        lines += [f"  {line}" for line in case_lines(case, every=False)]
    for check in report["checks"]:
        lines.append(f"  check {check['name']}: {check['status']}")
    if "retraining" in report:
        trained = report["retraining"]
        lines.append(f"  retrained: {trained['summary']}; {trained['identical']} of {len(trained['tensors'])} "
                     f"tensors bit for bit: {'passed' if trained['passed'] else 'FAILED'}: {trained['verdict']}")
    if "shared" in report:
        shared = report["shared"]
        lines.append(f"  shared: {shared['posted']} entr{'ies' if shared['posted'] > 1 else 'y'} posted to "
                     f"{shared['to']}" if "posted" in shared else f"  not shared: {shared['error']}")
    verdict = "PASSED" if report["status"] == "passed" else "FAILED"
    lines.append(f"{verdict}: {summary['values'] - summary['values_failed']} of {summary['values']} recorded values "
                 f"and {summary['checks'] - summary['checks_failed']} of {summary['checks']} checks hold, each value "
                 f"within its envelope (at least rtol {tol['rtol']:g}, atol {tol['atol']:g}; "
                 f"{summary.get('values_widened', 0)} wider, where rounding was measured to move them)" +
                 (f"; {summary['steps_checked']} steps checked one by one" if summary.get("steps_checked") else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensorviz", description="Check a TensorViz server's recordings here.")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="fetch a model's data, check its hashes, replay yours and compare")
    verify.add_argument("url", help="the model's page (http://host/models/<slug>) or API URL")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--retrain", action="store_true", help="also run its train.py and compare the weights")
    verify.add_argument("--checkpoint", help="the folder of the checkpoint a model that reads one was recorded with")
    verify.add_argument("--recipes", type=Path, default=RECIPES,
                        help=f"your copy of the recipes, whose code runs (default: {RECIPES})")
    verify.add_argument("--trust-server-code", action="store_true",
                        help="run the server's recipe code instead of yours: it runs with your privileges")
    verify.add_argument("--timeout", type=float, default=DEADLINE_SECONDS, help="seconds for the whole check")
    verify.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="the most any one file may hold")
    verify.add_argument("--share", action="store_true",
                        help="post the report's summary to the server's history of this model (marked as a reader's)")
    args = parser.parse_args(argv)
    ended = {number: signal.signal(number, _stop) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with tempfile.TemporaryDirectory(prefix="tensorviz-verify-") as folder:  # removed however the check ends
            try:
                report = verified(args.url, args.checkpoint, args.retrain, Path(folder), args.recipes.resolve(),
                                  args.trust_server_code, args.timeout, args.max_bytes)
            except Refused as exc:
                if args.json:
                    print(json.dumps({"status": "refused", "message": str(exc)}))
                else:
                    print(f"REFUSED: {exc}", file=sys.stderr)
                return 2
    finally:
        for number, handler in ended.items():
            signal.signal(number, handler)
    if args.share:
        report["shared"] = share(report)
    print(json.dumps(report, indent=2) if args.json else told(report))
    return 0 if report["status"] == "passed" else 1


def _stop(number: int, _frame) -> None:
    """A stop asked by a signal ends the check as an exception does: its download folder is removed."""
    raise SystemExit(128 + number)


def share(report: dict) -> dict:
    """Post the report's history entries (the replay's, and the retraining's where there was one) to the server:
    {"posted": n} or {"error": why} (a report shared or not is the same report)."""
    entries = [verification_entry(report, "client")]
    if "retraining" in report:
        trained = report["retraining"]
        entries.append(retraining_entry(trained | {"status": "passed" if trained["passed"] else "failed"},
                                        report["revision"], "client"))
    url = report["source"] + "/verifications/history"
    server = Server(target(report["source"])[0], time.monotonic() + 60.0, 2**20)
    try:
        for entry in entries:
            server.get(url, {k: v for k, v in entry.items() if k not in ("reported_by", "environment_id")})
    except Refused as exc:
        return {"error": str(exc)}
    return {"posted": len(entries), "to": url}


if __name__ == "__main__":
    sys.exit(main())
