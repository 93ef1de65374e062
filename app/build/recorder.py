"""The recorder: turns a recipe folder into a manifest and its static snapshot.

The graph is traced from the real model and the cases come from the recipe's own `replay()`, both in a
recipe worker (app/compute/capture.py), so the web process and the CLI never import torch. What the recipe
declares in `recipe.toml` (title, tour, case labels, ...) is written around them. Two recordings of one
recipe are identical but for `provenance.capturedAt`.
"""

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from ..compute.executor import run_admitted
from ..compute.messages import CaptureArgs, RecipeCall
from ..compute.pool import WorkerPool
from ..domain import requirements
from ..domain.catalog import (
    GRAPH_FILE,
    MANIFEST_NAME,
    PREVIEW_FILE,
    file_path,
    graph_document,
    recipe_files,
    resolve,
)
from ..domain.checkpoints import (
    Checkpoint,
    CheckpointDeclarationError,
    CheckpointUnavailable,
    checkpoint_spec,
    find,
    locate,
)
from ..domain.compare import ENVELOPE, compare_case, tolerance_for
from ..domain.declaration import read_declaration
from ..domain.folders import FolderError, check_links
from ..domain.graphlayout import build_preview
from ..domain.labs import LabSpec
from ..domain.labs.fields import DeclarationError, FieldError, validate
from ..domain.schema import ITEMS, ManifestError, validate_manifest
from . import rounding

RECORDER_VERSION = 1  # provenance.recorder: which recordings this recorder made (and may overwrite)
# Page metadata copied from recipe.toml into the manifest, in the seed manifest's order.
HEAD_FIELDS = ("title", "className", "question", "description", "category", "tags", "curator", "attribution",
               "license", "limitations", "openingStep")


class RecordingError(Exception):
    """The recipe cannot be recorded; the message says which file or value and why."""


@dataclass(frozen=True)
class Recording:
    """A manifest and the files stored beside it, as bytes, ready to write or compare."""

    slug: str
    manifest: dict
    files: dict[str, bytes]  # manifest.json, preview.svg


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def manifest_bytes(manifest: dict) -> bytes:
    """The manifest as stored; strict JSON, so NaN or infinity anywhere is an error, not a broken file."""
    try:
        return (json.dumps(manifest, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()
    except ValueError as exc:
        raise RecordingError(f"the recording holds a value JSON cannot carry: {exc}") from exc


def content_revision(manifest: dict) -> str:
    """A content hash of the recording: everything but the capture time and the revision-bearing URLs."""
    content = {k: v for k, v in manifest.items() if k not in ("revision", "files")}
    content["provenance"] = {k: v for k, v in content["provenance"].items() if k != "capturedAt"}
    return _sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode())[:16]


# What a replayed item may name besides its numbers: a matrix its rows and columns, a vector its entries.
NAMED = {"matrices": ("rows", "columns"), "vectors": ("names",)}


def _cases(meta: dict, replay: dict, without_checkpoint: bool) -> list[dict]:
    """The declared cases with the values the replay produced; every item needs a key. A recipe whose
    checkpoint is not on this machine records its graph and no case."""
    experiment = meta["experiment"]
    declared = experiment.get("cases") or []
    if not declared:
        raise RecordingError("recipe.toml: experiment.cases declares no case")
    replayed = replay.get("cases", {})
    if without_checkpoint:
        if replayed:
            raise RecordingError("run.py replay() returned cases without a checkpoint; it must return none")
        return []
    extra = sorted(set(replayed) - {c["id"] for c in declared})
    if extra:
        raise RecordingError(f"run.py replay() returns case {extra[0]!r}, which recipe.toml does not declare")
    cases = []
    for spec in declared:
        if spec["id"] not in replayed:
            raise RecordingError(f"run.py replay() returns no case {spec['id']!r} (declared in recipe.toml)")
        case = experiment.get("caseDefaults", {}) | spec
        values = replayed[spec["id"]]
        for _, kind, field in ITEMS:
            items = []
            for i, item in enumerate(values.get(kind, [])):
                if not item.get("key"):
                    raise RecordingError(f"case {spec['id']!r}: {kind}[{i}] ({item.get('label')!r}) has no key")
                if not all(math.isfinite(v) for v in _flat(item[field])):
                    raise RecordingError(f"case {spec['id']!r}: {kind} {item['key']!r} holds NaN or infinity")
                names = {axis: item[axis] for axis in NAMED.get(kind, ()) if axis in item}
                for axis, listed in names.items():
                    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
                        raise RecordingError(f"case {spec['id']!r}: {kind} {item['key']!r} names its {axis} with "
                                             "something other than a list of strings")
                items.append({"key": item["key"], "label": item.get("label") or item["key"], field: item[field]}
                             | ({"first": item["first"]} if "first" in item else {}) | names)
            case[kind] = items
        if isinstance(values.get("request"), dict):  # the lab request that reproduces the case: a preset
            case["request"] = values["request"]
        processes = replay.get("steps", {}).get(spec["id"], {})
        if processes:  # the states that entered each step of its iterated processes: what a step-by-step check needs
            case["steps"] = [{"key": key, "names": process["names"], "states": process["states"]}
                             for key, process in processes.items()]
        cases.append(case)
    return cases


def _each_case_as_among_others(replay: dict, alone: dict, declaration) -> None:
    """Each case replayed alone must equal the case in the whole replay, by the verification's rule: What if? and
    the training stages run a case alone (run.py's `replay(case=...)`)."""
    tol = tolerance_for({"experiment": declaration.experiment.model_dump(exclude_none=True)})
    for case_id, among in replay.get("cases", {}).items():
        found = alone.get(case_id)
        if not isinstance(found, dict):
            why = found if isinstance(found, str) else "it answered no such case"
            raise RecordingError(f"run.py replay(case={case_id!r}) cannot replay the case alone ({why}): What if? "
                                 "replays one case at a time, so replay() takes `case` and answers that case alone")
        compared = compare_case({"id": case_id, "label": case_id, **among}, found, tol)
        wrong = next((v for v in compared["values"] if v["status"] != "passed"), None)
        if wrong is not None:
            raise RecordingError(f"run.py replay(case={case_id!r}) answers {wrong['kind']} {wrong['key']!r} otherwise "
                                 "than the whole replay does: a case must compute alone as among the others (seed "
                                 "its own random draws)")


def _flat(value) -> list[float]:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [value]


def _provenance(meta: dict, graph: dict, replay: dict, environment: dict, model_py: bytes, seed: int,
                checkpoint: Checkpoint | None, variant: bool = False) -> dict:
    failed = [c["name"] for c in replay.get("checks", []) if not c.get("passed")]
    if failed and not variant:
        raise RecordingError(f"run.py check failed, nothing was recorded: {failed[0]}")
    recording = meta["recording"]
    return {
        "capturedAt": datetime.now(UTC).isoformat(),
        "recorder": RECORDER_VERSION,
        "sourceSha256": _sha256(model_py),
        "python": environment["python"],
        "torch": environment["torch"],
        "recordedOn": {key: environment[key] for key in RECORDED_ON},
        "execution": {"inputs": {"args": graph["inputs"]}, "device": environment["device"],
                      "mode": environment["mode"], "seed": seed, "deterministic": environment["deterministic"]},
        "outcome": "passed",
        "outputShape": graph["outputShape"],
        "method": recording.get("method", "TensorViz recorder"),
        "scope": recording.get("scope", ""),
        "numericalChecks": [c["name"] for c in replay.get("checks", [])],
    } | ({} if "checkpoint" not in meta else {"checkpoint": checkpoint and {"files": checkpoint.sha256}}) \
      | ({"failedChecks": failed} if variant else {})


# What the provenance says of the machine that recorded: what decides how its sums round.
RECORDED_ON = ("cpu", "vector_extensions", "kernels", "cpu_capability", "os", "numpy")


def _checkpoint(meta: dict, settings: Mapping) -> Checkpoint | None:
    """The recipe's checkpoint where it declares one and this machine has it (in the folder its setting
    names, else the local Hugging Face cache, else the packaged one unpacked); None records the graph alone."""
    if "checkpoint" not in meta:
        return None
    try:
        spec = checkpoint_spec(meta["checkpoint"])
        configured, unpacked = settings.get(spec.setting), settings.get("CHECKPOINTS_DIR")
        return find(spec, configured, unpacked) if locate(spec, configured, unpacked) else None
    except CheckpointDeclarationError as exc:
        raise RecordingError(f"recipe.toml: {exc}") from exc
    except CheckpointUnavailable as exc:
        raise RecordingError(exc.description) from exc


def _check_lab(spec: LabSpec, manifest: dict, recipe_dir: Path, pool: WorkerPool, context: dict) -> None:
    """Run each lab endpoint once, on the request its kind makes from the recorded cases, and check that it
    answers everything the kind's page reads (`LabKind.reads`): a recipe and its kind cannot drift apart."""
    presets = spec.kind.presets(manifest["experiment"]["cases"], spec)
    for name, reads in spec.kind.reads.items():
        endpoint = spec.endpoints[name]
        where = f"lab.endpoints.{name}"
        request = spec.kind.example(name, presets, spec)
        if request is None:
            raise RecordingError(f"{where}: no recorded case makes a request to check its answers with")
        try:
            args = spec.kind.prepare(name, validate(request, endpoint.fields), spec)
        except FieldError as exc:
            raise RecordingError(f"{where}: the request made from the first recorded case is refused: {exc}") from exc
        result = run_admitted(pool, RecipeCall.lab(recipe_dir, endpoint.entry, args, context)).result
        missing = reads.missing(result)
        if missing:
            raise RecordingError(f"{where}: {endpoint.entry}() answers without {', '.join(missing)}, "
                                 f"which the {spec.kind.name} lab reads")


def build_recording(slug: str, recipe_dir: Path, pool: WorkerPool, seed: int = 0,
                    settings: Mapping = MappingProxyType({}), measure: bool = True,
                    variant: str | None = None) -> Recording:
    """Trace and replay the recipe in a worker, measure how far other roundings move each recorded value (its
    envelope: build/rounding.py; not with `measure` false, which --check compares within the stored ones), and
    assemble the manifest and its files; `settings` (the app's configuration) names a checkpoint folder where the
    recipe reads one, and the kernel family it records with. A `variant` (its path under the model: "mlp/variants/
    <id>") is a learner's training, recorded whatever it learnt: a check it fails (it never learnt XOR) is recorded
    as failed (provenance.failedChecks), where the recorded model's recording is refused."""
    try:
        check_links(recipe_dir, f"recipes/{slug}")
        declaration = read_declaration(recipe_dir)
        files = recipe_files(recipe_dir)
    except (DeclarationError, ManifestError, FolderError) as exc:
        raise RecordingError(str(exc)) from exc
    needs = requirements.problems(files)
    if needs:
        raise RecordingError(f"recipes/{slug}: " + "; ".join(needs))
    meta = declaration.model_dump(exclude_unset=True)  # as written: the manifest holds what the recipe declares
    meta["experiment"].setdefault("kind", declaration.experiment.kind)
    checkpoint = _checkpoint(meta, settings)
    context = {"checkpoint": str(checkpoint.folder)} if checkpoint else {}
    capture = RecipeCall.make(recipe_dir, "capture", CaptureArgs(meta["recording"].get("inputs")), context)
    reply = run_admitted(pool, capture)
    graph, replay = reply.result["graph"], reply.result["replay"]
    _each_case_as_among_others(replay, reply.result["each_case"], declaration)
    manifest: dict = {"schemaVersion": 1, "slug": slug}
    for key in HEAD_FIELDS:
        value = graph["className"] if key == "className" else meta.get(key)
        if value is not None:
            manifest[key] = value
    manifest["provenance"] = _provenance(meta, graph, replay, reply.environment, files["model.py"], seed,
                                         checkpoint, variant is not None)
    manifest["layers"] = graph["layers"]
    manifest["connections"] = graph["connections"]
    manifest["steps"] = meta["steps"]
    manifest["milestone"] = meta["milestone"]
    experiment = {k: v for k, v in meta["experiment"].items() if k not in ("cases", "caseDefaults")}
    manifest["experiment"] = experiment | {"cases": _cases(meta, replay, "checkpoint" in meta and not checkpoint)}
    if measure and manifest["experiment"]["cases"]:
        try:
            manifest["experiment"]["rounding"] = rounding.measure(manifest, recipe_dir, context, pool, settings)
        except rounding.MeasurementError as exc:
            raise RecordingError(str(exc)) from exc
    manifest["revision"] = content_revision(manifest)
    try:
        validate_manifest(manifest | {"files": {}}, slug)
    except ManifestError as exc:
        raise RecordingError(f"the recording would not be valid: {exc}") from exc
    try:  # what the catalog resolves when it loads the recording, so that what is written loads
        resolved = resolve(declaration, manifest, recipe_dir)
    except DeclarationError as exc:
        raise RecordingError(f"recipe.toml: {exc}") from exc
    if resolved["lab"] is not None and (checkpoint or "checkpoint" not in meta):
        _check_lab(resolved["lab"], manifest, recipe_dir, pool, context)

    focus = declaration.graph.focus
    preview = build_preview(manifest, focus).encode()
    served = {GRAPH_FILE: graph_document(manifest), **files, PREVIEW_FILE: preview}
    manifest["files"] = {name: {"url": file_path(variant or slug, manifest["revision"], name),
                                "sha256": _sha256(content), "bytes": len(content)}
                         for name, content in served.items()}
    return Recording(slug, manifest, {MANIFEST_NAME: manifest_bytes(manifest), PREVIEW_FILE: preview})


def made_by_recorder(folder: Path) -> bool | None:
    """Whether the stored manifest was written by this recorder; None when there is none."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("provenance", {}).get("recorder") == RECORDER_VERSION


def is_original_capture(folder: Path) -> bool:
    """Whether the stored manifest is an original capture (bert's), made by no recorder at all: one that names no
    recorder in its provenance."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_bytes())
    except (OSError, ValueError):
        return False
    provenance = manifest.get("provenance") if isinstance(manifest, dict) else None
    return isinstance(provenance, dict) and "recorder" not in provenance


def write_recording(recording: Recording, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in recording.files.items():
        (folder / name).write_bytes(content)
        written.append(folder / name)
    return written


# ---- --check: what differs between a fresh recording and the stored one

# What a recording measured of the machine that made it (its envelopes, how they were measured), which another
# machine measures otherwise: not compared.
MEASURED = ("envelope", "stepEnvelope", "rounding")


def _differences(stored, fresh, where: str, tol, out: list[str], limit: int = 20) -> None:
    if len(out) >= limit:
        return
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if tol is not None:  # a recorded item's numbers are compared within the envelope stored with it
            tol = tol.for_field(stored, ENVELOPE)
        for key in sorted((set(stored) | set(fresh)) - set(MEASURED), key=str):
            if key not in fresh:
                out.append(f"{where}.{key}: stored, not recorded now")
            elif key not in stored:
                out.append(f"{where}.{key}: recorded now, not stored")
            else:
                _differences(stored[key], fresh[key], f"{where}.{key}", tol, out, limit)
    elif isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            out.append(f"{where}: {len(stored)} items stored, {len(fresh)} recorded now")
            return
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            _differences(a, b, f"{where}[{i}]", tol, out, limit)
    elif tol is not None and isinstance(stored, float | int) and isinstance(fresh, float | int) \
            and not isinstance(stored, bool):
        if abs(fresh - stored) > tol.allowance(stored):
            out.append(f"{where}: stored {stored!r}, recorded now {fresh!r}")
    elif stored != fresh:
        out.append(f"{where}: stored {json.dumps(stored)[:80]}, recorded now {json.dumps(fresh)[:80]}")


# Provenance that names the machine or the moment of the capture, not the recording's content.
VOLATILE = ("capturedAt", "python", "torch", "recordedOn")


def stale_parts(recording: Recording, folder: Path) -> list[str]:
    """What differs between the recording just made and the one stored in `folder` (empty when current).

    Recorded numbers are compared within the envelopes stored with them, so that another processor's or torch
    build's rounding does not count as stale; everything else but what the recording measured of its machine must be
    identical.
    """
    try:
        stored = json.loads((folder / MANIFEST_NAME).read_bytes())
    except (OSError, ValueError) as exc:
        return [f"{MANIFEST_NAME}: cannot be read ({exc.__class__.__name__})"]
    fresh = recording.manifest
    out: list[str] = []
    strip = ("revision", "files", "experiment", "provenance")
    _differences({k: v for k, v in stored.items() if k not in strip},
                 {k: v for k, v in fresh.items() if k not in strip}, "manifest", None, out)
    _differences({k: v for k, v in stored.get("provenance", {}).items() if k not in VOLATILE},
                 {k: v for k, v in fresh["provenance"].items() if k not in VOLATILE}, "provenance", None, out)
    _differences(stored.get("experiment"), fresh["experiment"], "experiment", tolerance_for(fresh), out)
    if not out:
        stored_files, fresh_files = stored.get("files", {}), dict(fresh["files"])
        # The graph file names the revision, a hash of every recorded number, so numbers within the
        # tolerance (another machine's last bits) give another file: it is compared under the stored revision.
        if isinstance(stored.get("revision"), str):
            under_stored = graph_document(fresh | {"revision": stored["revision"]})
            fresh_files[GRAPH_FILE] = {"sha256": _sha256(under_stored)}
        for name in sorted(set(stored_files) | set(fresh_files)):
            if stored_files.get(name, {}).get("sha256") != fresh_files.get(name, {}).get("sha256"):
                out.append(f"files.{name}: the file changed since it was recorded")
        path = folder / PREVIEW_FILE
        if not path.is_file() or path.read_bytes() != recording.files[PREVIEW_FILE]:
            out.append(f"{PREVIEW_FILE}: differs from the snapshot drawn from this recording")
    return out
