"""`tensorviz verify <model page or API URL>`: a server's recording checked on the reader's own machine.

    tensorviz verify http://127.0.0.1:8000/models/lenet            # a model page, or /api/models/lenet
    tensorviz verify http://127.0.0.1:8000/models/lenet --json     # the report as JSON
    tensorviz verify http://127.0.0.1:8000/models/gcn --retrain    # train it again too, and compare the weights
    tensorviz verify http://127.0.0.1:8000/models/lenet --share     # and post the summary to the server's history

It fetches the model's manifest and every file the manifest records through the server's API, refuses any file
whose sha256 is not the manifest's (naming it), replays the recipe in a fresh process with the recorded seed and
settings (tensorviz/replay.py), and compares every recorded value by the server's own rules
(app/domain/compare.py). With --retrain it also runs the recipe's train.py as the server's retraining does
(app/compute/retraining.py) and compares every tensor with the fetched weights. Nothing the server says is trusted
but the hashes in its manifest: the report is made here.

Exit status: 0 when every value (and every retrained tensor) holds, 1 when one does not, 2 when it could not
check (a file refused, the server out of reach, the recipe failed to run).
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from app.compute.errors import RecipeError
from app.compute.messages import Failure, Reply, read_reply
from app.compute.retraining import RetrainCall, retrain
from app.domain.compare import case_lines, compare_replay, recorded_states
from app.domain.history import retraining_entry, verification_entry

FETCH_SECONDS = 60.0
REPLAY_SECONDS = 600.0
RETRAIN_SECONDS = 1800.0
MODEL_PATH = re.compile(r"^(?P<prefix>.*?)/(?:api/)?models/(?P<slug>[a-z0-9][a-z0-9-]*)(?:/|$)")
PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class Refused(Exception):
    """The check could not be made: the message says what and why (exit status 2)."""


def target(url: str) -> tuple[str, str]:
    """The server's base URL and the model's slug, from a model page's or the API's URL."""
    parts = urllib.parse.urlsplit(url)
    found = MODEL_PATH.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or found is None:
        raise Refused(f"{url!r} is not a model page or API URL (like http://host/models/<slug>)")
    return f"{parts.scheme}://{parts.netloc}{found['prefix']}", found["slug"]


def fetch(url: str, body: dict | None = None) -> bytes:
    """The body at `url` (POSTing `body` as JSON where given); Refused with the server's own message where it
    answers an error."""
    headers = {"Accept": "application/json, */*", "User-Agent": "tensorviz-verify"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=FETCH_SECONDS) as answer:
            return answer.read()
    except urllib.error.HTTPError as exc:
        try:
            said = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            said = exc.reason
        raise Refused(f"{url} answered {exc.code}: {said}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise Refused(f"{url} cannot be reached: {getattr(exc, 'reason', exc)}") from None


def fetched_files(base: str, manifest: dict, folder: Path) -> list[dict]:
    """Every file the manifest records, fetched into `folder` and checked: Refused naming every file whose sha256 is
    not the manifest's (or whose name is not a plain file name), before anything runs."""
    checked, refused = [], []
    for name, recorded in manifest.get("files", {}).items():
        if not PLAIN_NAME.match(name) or not isinstance(recorded, dict) or "sha256" not in recorded:
            raise Refused(f"{name}: the manifest records it in a way this verifier does not trust (not a plain file "
                          "name with its sha256)")
        body = fetch(urllib.parse.urljoin(base + "/", recorded["url"].lstrip("/")))
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


def checked_checkpoint(folder: Path, recorded: dict[str, str]) -> None:
    """The reader's checkpoint folder holds the files the recording was made from: Refused naming the first that
    is missing or another file."""
    for name, sha256 in recorded.items():
        try:
            digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        except OSError as exc:
            raise Refused(f"{name}: the checkpoint folder {folder} has no readable {name} ({exc.strerror})") from None
        if digest != sha256:
            raise Refused(f"{name}: the checkpoint's file has sha256 {digest}, not the {sha256} the recording was "
                          "made from: refused, nothing was run")


def replayed(folder: Path, seed: int, checkpoint: str | None, states: dict) -> Reply:
    """The recipe's replay in a fresh process, its iterated processes then replayed step by step from the recorded
    `states`: the worker's reply."""
    given = folder.parent / "recorded-states.json"
    given.write_text(json.dumps(states))
    command = [sys.executable, "-m", "tensorviz.replay", str(folder), str(seed), *([checkpoint] if checkpoint else []),
               "--states", str(given)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=REPLAY_SECONDS)
    except subprocess.TimeoutExpired:
        raise Refused(f"the replay ran past {REPLAY_SECONDS:g} s and was stopped") from None
    try:
        reply = read_reply(json.loads(done.stdout))
    except (ValueError, TypeError, KeyError):
        raise Refused(f"the replay process ended (exit status {done.returncode}) without a reply: "
                      f"{done.stderr.strip().splitlines()[-1:] or ''}") from None
    if isinstance(reply, Failure):
        raise Refused(f"the recipe failed to replay: {reply.error or reply.words}")
    return reply


def verified(url: str, checkpoint: str | None, retraining: bool, folder: Path) -> dict:
    """The whole check of the model at `url`, files fetched into `folder`: a report (Refused where none can be
    made)."""
    base, slug = target(url)
    manifest = json.loads(fetch(f"{base}/api/models/{slug}"))
    if retraining and "train.py" not in manifest.get("files", {}):
        raise Refused(f"{slug} is not trained by its recipe (its manifest records no train.py)")
    recorded_checkpoint = manifest.get("provenance", {}).get("checkpoint")
    if recorded_checkpoint and not checkpoint:
        raise Refused(f"{slug} reads a pretrained checkpoint the server does not serve: give its folder with "
                      "--checkpoint")
    if recorded_checkpoint:
        checked_checkpoint(Path(checkpoint), recorded_checkpoint.get("files", {}))
    recipe = folder / slug
    recipe.mkdir()
    report: dict = {"model": slug, "revision": manifest.get("revision"), "source": f"{base}/api/models/{slug}",
                    "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "files": fetched_files(base, manifest, recipe)}
    seed = int(manifest.get("provenance", {}).get("execution", {}).get("seed", 0))
    reply = replayed(recipe, seed, checkpoint, recorded_states(manifest))
    report |= compare_replay(manifest, reply.result)
    report |= {"environment": reply.environment, "compute_seconds": reply.compute_seconds,
               "replay_sha256": hashlib.sha256(reply.result_json.encode()).hexdigest()}
    if retraining:
        try:
            trained = retrain(RetrainCall(recipe, RETRAIN_SECONDS), lambda event: None, lambda: False)
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
             f"files: {len(report['files'])} fetched, each sha256 the manifest's",
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
    verify = commands.add_parser("verify", help="fetch a model's recipe, check its hashes, replay it and compare")
    verify.add_argument("url", help="the model's page (http://host/models/<slug>) or API URL")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--retrain", action="store_true", help="also run its train.py and compare the weights")
    verify.add_argument("--checkpoint", help="the folder of the checkpoint a model that reads one was recorded with")
    verify.add_argument("--share", action="store_true",
                        help="post the report's summary to the server's history of this model (marked as a reader's)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tensorviz-verify-") as folder:
        try:
            report = verified(args.url, args.checkpoint, args.retrain, Path(folder))
        except Refused as exc:
            if args.json:
                print(json.dumps({"status": "refused", "message": str(exc)}))
            else:
                print(f"REFUSED: {exc}", file=sys.stderr)
            return 2
    if args.share:
        report["shared"] = share(report)
    print(json.dumps(report, indent=2) if args.json else told(report))
    return 0 if report["status"] == "passed" else 1


def share(report: dict) -> dict:
    """Post the report's history entries (the replay's, and the retraining's where there was one) to the server:
    {"posted": n} or {"error": why} (a report shared or not is the same report)."""
    entries = [verification_entry(report, "client")]
    if "retraining" in report:
        trained = report["retraining"]
        entries.append(retraining_entry(trained | {"status": "passed" if trained["passed"] else "failed"},
                                        report["revision"], "client"))
    url = report["source"] + "/verifications/history"
    try:
        for entry in entries:
            fetch(url, {k: v for k, v in entry.items() if k not in ("reported_by", "environment_id")})
    except Refused as exc:
        return {"error": str(exc)}
    return {"posted": len(entries), "to": url}


if __name__ == "__main__":
    sys.exit(main())
