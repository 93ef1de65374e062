"""The catalog: every manifest under MANIFESTS_DIR, loaded and validated once at start-up."""

import hashlib
import json
import logging
import math
import mimetypes
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from recipekit.knobs import Knob, KnobError
from recipekit.knobs import declared as declared_knobs

from . import attention, pictures, requirements, tour
from .checkpoints import CheckpointDeclarationError, CheckpointSpec, checkpoint_spec
from .declaration import Declaration, read_declaration
from .figures import Display
from .folders import FolderError, check_links, read_inside, without_paths
from .graphlayout import drawing_document
from .interventions import Heads, declared_heads
from .jsonbytes import finite
from .labs import LabSpec, lab_spec
from .labs.fields import DeclarationError
from .plain_names import plain_name
from .recipes import kit_digest, kit_folder
from .schema import FILE_NAME, ITEMS, ManifestError, validate_manifest
from .shapes import FileEntry
from .stamps import file_stamp
from .training_stages import Training, declared_training
from .weights import Weights, declared_weights

log = logging.getLogger(__name__)

MANIFEST_NAME = "manifest.json"
MANIFEST_MOST_BYTES = 64 * 2**20  # the largest manifest read (MANIFEST_MAX_BYTES): 10,000 nodes take 5 MB
RECIPE_FILE_MOST_BYTES = 256 * 2**20  # the largest recipe file served (its weights, its data)
RECIPE_FILES = ("model.py", "run.py", "requirements.txt")  # every recipe has these
README_FILE = "README.md"  # the recipe's documentation: never run, so neither served nor hashed into its keys
LAB_FILE = "lab.py"  # what-if runs, the corruption sampler and the trace, where a recipe has them
GRAPH_FILE = "graph.tensorviz.json"
PREVIEW_FILE = "preview.svg"  # the static architecture snapshot, stored beside the manifest
PICTURE_FILE = "picture.svg"  # one recorded matrix, the model's own output: the catalog card's picture (pictures.py)
THUMBNAIL_FILE = "thumbnail.svg"  # the snapshot without its labels: the model's shape, for the catalog's cards
CONTENT_TYPES = {
    ".py": "text/x-python; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".toml": "text/plain; charset=utf-8",
    ".safetensors": "application/octet-stream",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class ServedFile:
    """A downloadable artefact of a model, with the hash of what is actually served."""

    name: str
    content: bytes
    content_type: str

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def size(self) -> int:
        return len(self.content)


def file_path(slug: str, revision: str, name: str) -> str:
    """Where a model's file is served (downloads.model_file): the revision in the path, so that the URL of
    changed content changes too."""
    return f"/models/{slug}/{revision}/{name}"


@dataclass(frozen=True)
class Model:
    """A manifest that passed validation, as recorded, plus the files served for it."""

    slug: str
    manifest: dict
    raw: bytes  # the manifest file byte for byte: the recording is served unchanged
    recipe_dir: Path
    files: dict[str, ServedFile]
    recipe_file_names: tuple[str, ...] = ()  # which of `files` come from the recipe folder
    lab: LabSpec | None = None  # the recipe's declared lab, where it has one
    checkpoint: CheckpointSpec | None = None  # weights read from a folder on this server, where declared
    graph_focus: str | None = None  # the module the interactive graph opens with (recipe.toml [graph] focus)
    heads: dict[str, Heads] = field(default_factory=dict)  # attention modules whose heads interventions reach
    training: Training | None = None  # the weights kept during training, where the recipe trains its model
    knobs: dict[str, Knob] = field(default_factory=dict)  # what a learner may move to train a variant
    weights: Weights | None = None  # what the recorded weights are: trained (on what), pretrained or random
    display: Display = field(default_factory=Display)  # how the recorded items are drawn (recipe.toml [display])
    names: dict[str, str] = field(default_factory=dict)  # the graph nodes' plain names (recipe.toml [names])
    glossary: dict[str, str] = field(default_factory=dict)  # the page's own terms (recipe.toml [glossary])
    kit_sha256: str | None = None  # the recipe kit's files, where the recipe imports it: its runs depend on them

    @property
    def revision(self) -> str:
        return self.manifest["revision"]

    @cached_property
    def etag(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    @cached_property
    def recipe_sha256(self) -> str:
        """One hash over every recipe file, and the recipe kit's where the recipe imports it: what a cached result
        of running the recipe depends on."""
        parts = [f"{name}:{self.files[name].sha256}" for name in self.recipe_file_names]
        kit = [f"recipekit:{self.kit_sha256}"] if self.kit_sha256 else []
        return hashlib.sha256("\n".join([*parts, *kit]).encode()).hexdigest()

    @property
    def has_lab(self) -> bool:
        return self.lab is not None

    @cached_property
    def tour_steps(self) -> list[dict]:
        """Every step of the page's tour, the generated overview first: worked out once per recording."""
        return tour.steps(self.manifest)

    @cached_property
    def preview_size(self) -> tuple[int, int]:
        """The snapshot's shown width and height in CSS pixels (about half its natural size), so that the
        page reserves its space."""
        preview = self.files.get(PREVIEW_FILE)
        size = rb'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"'
        found = re.search(size, preview.content) if preview else None
        return (round(float(found[1]) * 0.47), round(float(found[2]) * 0.47)) if found else (224, 634)

    @cached_property
    def drawing(self) -> bytes:
        """The graph as the interactive graph draws it (graphlayout.drawing_document), made once."""
        return drawing_document(self.manifest, self.names)

    def case(self, case_id: str) -> dict | None:
        """The recorded case with this id, if there is one."""
        return next((c for c in self.manifest["experiment"]["cases"] if c["id"] == case_id), None)

    def axes(self, case: dict) -> dict[str, dict]:
        """The rows and columns of a case's matrices, by matrix key: as the recipe named them in the case (a
        graph's members), else as the lab kind knows them (tokens, positions); unnamed axes keep their numbers."""
        found = self.lab.axes(case) if self.lab else {}
        for matrix in case.get("matrices", []):
            if plane := self.display.plane_axes(matrix):
                found[matrix["key"]] = plane
                continue
            named = {axis: [{"name": str(name)} for name in matrix[axis]] for axis in ("rows", "columns")
                     if isinstance(matrix.get(axis), list)}
            if named:
                found[matrix["key"]] = found.get(matrix["key"], {}) | named
        return found

    def plain_name(self, layer: dict) -> str | None:
        """A recorded layer's plain name (plain_names.plain_name), the recipe's where it declares one."""
        return plain_name(layer, self.names)

    def outcome(self, case: dict) -> str | None:
        """What the model answered in a case, in a sentence, where its lab kind reads the case; else None. Random
        weights answer at random, and the sentence says so."""
        said = self.lab.outcome(case) if self.lab else None
        if said and self.weights and self.weights.state == "random":
            said += " The weights are random, so this answer means nothing."
        return said

    def vector_names(self, case: dict) -> dict[str, list[str]]:
        """What each entry of a case's vectors is, by key: as the recipe named them in the case, else as the lab kind
        knows them (the tokens a vector holds, the vocabulary along a distribution); unnamed entries keep their
        numbers."""
        found = self.lab.kind.vector_names(case, self.lab) if self.lab else {}
        return found | {v["key"]: [str(n) for n in v["names"]] for v in case.get("vectors", [])
                        if isinstance(v.get("names"), list) and "key" in v}

    def sections(self, case: dict) -> list[dict]:
        """A case's matrices in the groups the recipe's [display] declares (Display.sections), with or without a
        lab; every other matrix alone."""
        return self.display.sections(case.get("matrices", []))

    def attention_overviews(self, case: dict, axes: dict[str, dict]) -> list[dict]:
        """Every layer and head of each kind of attention the case records (attention.overviews), with each map's
        values and the names of the rows (the queries) where they are known (`axes`, the case's: Model.axes)."""
        matrices = {m["key"]: m for m in case.get("matrices", [])}
        found = []
        for overview in attention.overviews(case.get("matrices", [])):
            first = next(key for row in overview["grid"] for key in row if key)
            rows = axes.get(first, {}).get("rows")
            found.append(overview | {"maps": [[matrices[key]["values"] if key else None for key in row]
                                              for row in overview["grid"]],
                                     "rows": [row["name"] for row in rows] if rows else None})
        return found

    def groups(self, case: dict) -> list[dict]:
        """The groups a case's matrices are drawn in, by key (for a live answer, whose page draws them)."""
        return [section["group"] | {"maps": [{"key": m["key"], "index": m["index"]} for m in section["maps"]]}
                for section in self.sections(case) if "group" in section]

    def file_url(self, name: str) -> str:
        return file_path(self.slug, self.revision, name)


@dataclass(frozen=True)
class Unavailable:
    """A manifest folder that could not be served, and why."""

    slug: str
    reason: str
    until: float | None = None  # suspended for a while (its recipe hung): the epoch time it is served again


@dataclass(frozen=True)
class Catalog:
    """The models served and the folders that could not be; a new Catalog replaces it when files change."""

    models: dict[str, Model] = field(default_factory=dict)
    unavailable: dict[str, Unavailable] = field(default_factory=dict)
    _derived: dict = field(default_factory=dict, repr=False, compare=False)
    _deriving: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def path(self) -> list[Model]:
        """A path through the milestones in the order they came (year, then name): each answers a question an
        earlier one left open. Sorted once for the catalog (every page asks for its place on it)."""
        return self.derived("path", lambda: sorted(
            self.models.values(),
            key=lambda m: (m.manifest["milestone"]["year"], m.manifest["milestone"]["name"], m.slug)))

    def neighbours(self, model: Model) -> tuple[Model | None, Model | None]:
        """The milestones before and after `model` on the path (None at either end, and for a learner's variant,
        which is on no path)."""
        path = self.path()
        slugs = [m.slug for m in path]
        if model.slug not in slugs:
            return None, None
        at = slugs.index(model.slug)
        return (path[at - 1] if at else None), (path[at + 1] if at + 1 < len(path) else None)

    def trained_twins(self, model: Model) -> list[Model]:
        """For a model whose weights are random, the models of the same milestone whose weights are not: where a
        learner finds predictions that mean something."""
        if model.weights is None or model.weights.state != "random":
            return []
        name = model.manifest["milestone"]["name"]
        return [m for m in self.path() if m is not model and m.manifest["milestone"]["name"] == name
                and m.weights is not None and m.weights.state != "random"]

    def derived(self, name: str, make: Callable[[], Any]) -> Any:
        """What is made from this catalog alone (the OpenAPI document, the rendered pages kept), made once
        and gone with the catalog: a changed model file can never leave a stale copy behind."""
        with self._deriving:
            if name not in self._derived:
                self._derived[name] = make()
            return self._derived[name]


# Why a served file's hash can differ from the one the manifest recorded, said plainly.
DIFFERS_FROM_RECORDING = {
    "model.py": "Differs from the file recorded at capture: this is the project's own recipe. "
                "Verification re-runs it and shows whether it still reproduces every recorded value.",
    "graph.tensorviz.json": "Rebuilt from the manifest's layers, connections and steps; "
                            "the capture's graph file had another format.",
    "preview.svg": "Drawn by this project from the manifest's graph; the capture's snapshot differed.",
    "thumbnail.svg": "The snapshot without its labels, drawn by this project for the catalog.",
    "picture.svg": "One recorded matrix drawn by this project for the catalog's card.",
}


def file_listing(model: Model) -> list[FileEntry]:
    """Each served file: where to get it, what it hashes to, and how that compares with the recording."""
    recorded = model.manifest["files"]
    listing = []
    for name, served in model.files.items():
        entry = {
            "name": name,
            "url": model.file_url(name),
            "content_type": served.content_type,
            "size": served.size,
            "sha256": served.sha256,
            "recorded_sha256": recorded.get(name, {}).get("sha256"),
            "recorded_size": recorded.get(name, {}).get("bytes"),
        }
        entry["matches_recording"] = entry["recorded_sha256"] == served.sha256
        if entry["recorded_sha256"] and not entry["matches_recording"]:
            entry["note"] = DIFFERS_FROM_RECORDING.get(name, DIFFERS_FROM_RECORDING["model.py"])
        listing.append(entry)
    return listing


def graph_document(manifest: dict) -> bytes:
    """The graph file built from the manifest: layers, connections and the tour that walks them."""
    keys = ("slug", "revision", "className", "layers", "connections", "steps", "openingStep")
    document = {"format": "tensorviz-graph", "schemaVersion": 1} | {k: manifest.get(k) for k in keys}
    try:  # orjson: a tenth of the standard library's time, which every start of the app pays per model
        return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:  # what orjson refuses (an integer past 64 bits)
        return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def _served_file(name: str, content: bytes) -> ServedFile:
    suffix = Path(name).suffix
    content_type = CONTENT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return ServedFile(name, content, content_type)


def recipe_files(recipe_dir: Path) -> dict[str, bytes]:
    """Every file of the recipe folder, the required ones first: what a model serves, what a recording
    hashes, and what a cached result of running the recipe depends on (weights and data included)."""
    shown = f"recipes/{recipe_dir.name}"
    missing = [name for name in RECIPE_FILES if not (recipe_dir / name).is_file()]
    if missing:
        raise ManifestError(f"{shown}/{missing[0]} is missing")
    others = sorted(p.name for p in recipe_dir.iterdir()
                    if p.is_file() and FILE_NAME.fullmatch(p.name) and p.name not in (*RECIPE_FILES, README_FILE))
    try:
        return {name: read_inside(recipe_dir, name, shown, RECIPE_FILE_MOST_BYTES) for name in (*RECIPE_FILES, *others)}
    except FolderError as exc:
        raise ManifestError(str(exc)) from None


def _model_files(manifest: dict, folder: Path, recipe: dict[str, bytes], display: Display) -> dict[str, ServedFile]:
    files = {GRAPH_FILE: _served_file(GRAPH_FILE, graph_document(manifest))}
    shown = pictures.chosen(manifest, display.picture)
    if shown is not None:  # the model's own output, for its catalog card
        files[PICTURE_FILE] = _served_file(PICTURE_FILE, pictures.picture_svg(shown, display.ink(shown)))
    files |= {name: _served_file(name, content) for name, content in recipe.items()}
    if (folder / PREVIEW_FILE).is_file():
        try:
            preview = read_inside(folder, PREVIEW_FILE, f"manifests/{folder.name}", RECIPE_FILE_MOST_BYTES)
        except FolderError as exc:
            raise ManifestError(str(exc)) from None
        files[PREVIEW_FILE] = _served_file(PREVIEW_FILE, preview)
    if PREVIEW_FILE in files:
        files[THUMBNAIL_FILE] = _served_file(THUMBNAIL_FILE, thumbnail(files[PREVIEW_FILE].content))
    return files


def thumbnail(preview: bytes) -> bytes:
    """The snapshot's boxes and arrows without its text: at a card's size, labels would be illegible specks."""
    return re.sub(rb"\s*<(text|title)\b[^>]*>.*?</\1>", b"", preview, flags=re.DOTALL)


def apply_keys(manifest: dict, keys: dict[str, str]) -> None:
    """Give every recorded item its stable key. Items recorded before keys existed get theirs from the
    recipe's one mapping of labels to keys; the app never looks a value up by its label."""
    for case in manifest["experiment"]["cases"]:
        for _, kind, _ in ITEMS:
            seen = set()
            for i, item in enumerate(case.get(kind, [])):
                key = item.get("key") or keys.get(item["label"])
                if not isinstance(key, str) or not key:
                    raise ManifestError(f"experiment.cases[{case['id']!r}].{kind}[{i}]: has no key, and "
                                        f"recipe.toml [recording.keys] maps none for its label")
                if key in seen:
                    raise ManifestError(f"experiment.cases[{case['id']!r}].{kind}[{i}]: repeats key {key!r}")
                seen.add(key)
                item["key"] = key


def apply_op_names(manifest: dict, names: dict[str, str]) -> None:
    """Name the ops a capture recorded only as `Python` (what ran on their lines, from the recipe's
    [graph.ops]), so that the graph says `arange` rather than `python / Python`. The stored bytes are
    served unchanged; the page, the table and the layouts show the names."""
    for layer in manifest["layers"]:
        name = names.get(layer["id"])
        if isinstance(name, str) and name:
            layer["op"] = name
            layer["label"] = name.split(" ")[0]


def _lab(declaration: Declaration, manifest: dict, recipe_dir: Path, display: Display) -> LabSpec | None:
    if declaration.lab is None:
        return None
    if not (recipe_dir / LAB_FILE).is_file():
        raise ManifestError(f"recipe.toml declares a lab, but recipes/{recipe_dir.name}/{LAB_FILE} is missing")
    return lab_spec(declaration.lab.model_dump(exclude_unset=True), manifest, display.groups)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 overflows to infinity
        raise ManifestError(f"{MANIFEST_NAME} holds {text}, which no float can hold; JSON has no infinity")
    return value


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # past 64 bits: no page, export or answer needs one
        raise ManifestError(f"{MANIFEST_NAME} holds an integer of {len(text.lstrip('-'))} digits; at most 19 are read")
    return int(text)


def _no_constant(name: str):
    raise ManifestError(f"{MANIFEST_NAME} holds {name}, which is not JSON; write null or a finite number")


def parse_manifest(raw: bytes) -> dict:
    """A manifest's JSON, strictly: NaN, Infinity, numbers past a float's range and integers past 64 bits are
    refused (ManifestError), as the pages, the exports and the API's strict JSON cannot carry them; so is JSON
    nested too deeply to read."""
    try:
        # Floats are read as floats and checked all at once after (a call per number was a sixth of loading the
        # catalog); only a manifest that holds a number past a float's range is read again, to name it.
        manifest = json.loads(raw, parse_int=_integer, parse_constant=_no_constant)
        if not finite(manifest):
            json.loads(raw, parse_float=_finite)
        return manifest
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{MANIFEST_NAME} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ManifestError(f"{MANIFEST_NAME} nests too deeply to be a manifest") from None


def resolve(declaration: Declaration, manifest: dict, recipe_dir: Path) -> dict:
    """What the declaration adds to the recording, each part resolved against it (a Model's fields):
    DeclarationError says what does not fit. The recorder runs it on a new recording, so that what it writes
    loads."""
    shown = declaration.display
    display = Display(tuple(g.model_dump(exclude_none=True) for g in shown.groups),
                      {key: curve.model_dump() for key, curve in shown.curves.items()},
                      {key: scatter.model_dump() for key, scatter in shown.scatters.items()},
                      {key: plane.model_dump() for key, plane in shown.planes.items()},
                      {key: image.model_dump() for key, image in shown.images.items()},
                      shown.picture.model_dump() if shown.picture else None)
    pictures.chosen(manifest, display.picture)  # a declared picture the recording holds
    focus = declaration.graph.focus
    if focus is not None and next((layer["kind"] for layer in manifest["layers"] if layer["id"] == focus),
                                  None) != "module":
        raise DeclarationError(f"graph.focus: {focus!r} is not a module of the recorded graph")
    lab = _lab(declaration, manifest, recipe_dir, display)
    training = declared_training(declaration.training.model_dump() if declaration.training else {}, recipe_dir)
    try:
        knobs = declared_knobs(recipe_dir)  # as train.py reads them: whole numbers stay whole
    except KnobError as exc:
        raise DeclarationError(str(exc)) from None
    if training is not None and lab is None:
        raise DeclarationError("[training] needs a [lab], whose entries run on the kept weights")
    checkpoint = None
    if declaration.checkpoint is not None:
        try:
            checkpoint = checkpoint_spec(declaration.checkpoint.model_dump())
        except CheckpointDeclarationError as exc:
            raise DeclarationError(str(exc)) from exc
    return {"lab": lab, "checkpoint": checkpoint, "graph_focus": focus, "display": display, "names": declaration.names,
            "glossary": declaration.glossary, "heads": declared_heads(declaration.interventions.model_dump(), manifest),
            "training": training, "knobs": knobs, "weights": declared_weights(declaration.weights.model_dump())}


def load_model(folder: Path, recipes_dir: Path, most_bytes: int = MANIFEST_MOST_BYTES) -> Model:
    """Read, parse and validate one manifest folder and its recipe folder; ManifestError says what is wrong."""
    return read_model(folder.name, folder, recipes_dir / folder.name, most_bytes)


def read_model(slug: str, folder: Path, recipe_dir: Path, most_bytes: int = MANIFEST_MOST_BYTES,
               served_as: str | None = None) -> Model:
    """The model of the recording in `folder` and the recipe in `recipe_dir`, served under its slug or under
    `served_as` (a learner's variant: "mlp/variants/<id>", recorded from a folder of its own)."""
    try:
        check_links(folder, f"manifests/{slug}")
        raw = read_inside(folder, MANIFEST_NAME, f"manifests/{slug}", most_bytes)
        if not recipe_dir.is_dir():
            raise ManifestError(f"recipes/{slug} is missing: a recording is served with its recipe")
        check_links(recipe_dir, f"recipes/{slug}")
    except FolderError as exc:
        raise ManifestError(str(exc)) from None
    manifest = parse_manifest(raw)
    validate_manifest(manifest, slug)
    try:
        declaration = read_declaration(recipe_dir)
        apply_keys(manifest, declaration.recording.keys)
        apply_op_names(manifest, declaration.graph.ops)
        declared = resolve(declaration, manifest, recipe_dir)
    except DeclarationError as exc:
        message = str(exc)
        raise ManifestError(message if message.startswith("recipes/") else f"recipe.toml: {message}") from None
    recipe = recipe_files(recipe_dir)
    needs = requirements.problems(recipe)
    if needs:
        raise ManifestError(f"recipes/{slug}/{needs[0]}")
    kit = kit_digest() if requirements.uses_kit(recipe) else None
    files = _model_files(manifest, folder, recipe, declared["display"])
    return Model(served_as or slug, manifest, raw, recipe_dir, files, tuple(recipe),
                 **declared, kit_sha256=kit)


def load_catalog(manifests_dir: Path, recipes_dir: Path, most_bytes: int = MANIFEST_MOST_BYTES) -> Catalog:
    """Every manifest folder, sorted by slug; a bad one is left out with its reason, never fatal: whatever a
    folder holds, the other models are served."""
    catalog = Catalog()
    folders = sorted(p for p in manifests_dir.iterdir() if p.is_dir()) if manifests_dir.is_dir() else []
    if not folders:
        log.warning("no manifests found under %s", manifests_dir)
    for folder in folders:
        try:
            catalog.models[folder.name] = load_model(folder, recipes_dir, most_bytes)
            continue
        except ManifestError as exc:
            reason = str(exc)
        except OSError as exc:  # an unreadable recipe or layout file: said without the server's paths
            name = Path(exc.filename).name if exc.filename else "a file"
            reason = f"cannot read {name} of its manifest or recipe folder: {exc.strerror or type(exc).__name__}"
        except Exception:  # noqa: BLE001 (a shape no check foresaw: this model alone is left out)
            log.exception("manifest %s could not be loaded", folder.name)
            reason = "its manifest or recipe folder could not be read as one (the server's log says where)"
        reason = without_paths(reason, (str(manifests_dir), str(recipes_dir)))
        log.error("manifest %s is unavailable: %s", folder.name, reason)
        catalog.unavailable[folder.name] = Unavailable(folder.name, reason)
    return catalog


def _signature(*folders: Path) -> tuple:
    """What the catalog was built from: every file below the folders, with its stamp (any edit changes it). Links
    to folders are not walked; a file that vanishes meanwhile, or a link to nothing, counts as changed."""
    found = []
    for folder in folders:
        for top, subfolders, files in os.walk(folder, followlinks=False):
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            for name in files:
                path = os.path.join(top, name)
                try:
                    found.append((path, *file_stamp(os.stat(path))))
                except OSError:
                    found.append((path, -1))
    return tuple(sorted(found))


class LiveCatalog:
    """The catalog, rebuilt when a file under manifests/ or recipes/ changes (looked at every `interval` s),
    so that a manifest broken on disk is reported unavailable, and served again once it is mended,
    without a restart."""

    def __init__(self, manifests_dir: Path, recipes_dir: Path, interval: float,
                 most_bytes: int = MANIFEST_MOST_BYTES) -> None:
        kit = kit_folder()
        self.folders = (manifests_dir, recipes_dir)
        self.watched = (*self.folders, *([kit] if kit else []))  # a change to the recipe kit re-keys its recipes
        self.interval = interval
        self.most_bytes = most_bytes
        # slug -> (its recipe's hash when suspended, why, until when: an epoch time, or None for as long as its files)
        self.suspended: dict[str, tuple[str, str, float | None]] = {}
        self.signature = self._signature()
        self.loaded = load_catalog(*self.folders, most_bytes)  # as the files are; `catalog` less what is suspended
        self.catalog = self.loaded
        self.checked = time.monotonic()
        self.lock = threading.Lock()

    def current(self) -> Catalog:
        if self.interval and time.monotonic() - self.checked >= self.interval:
            with self.lock:
                self.checked = time.monotonic()
                signature = self._signature()
                if signature != self.signature:
                    log.warning("model files or installed packages changed; reloading the catalog")
                    self.loaded = load_catalog(*self.folders, self.most_bytes)
                    self.catalog = self._without_suspended()
                    self.signature = signature
        if any(until is not None and until <= time.time() for _, _, until in self.suspended.values()):
            with self.lock:  # a model suspended for a while is served again
                self.catalog = self._without_suspended()
        return self.catalog

    def _signature(self) -> tuple:
        """The files the catalog is made from, and what is installed: a recipe whose requirement is installed while
        the server runs is served at the next look, without a restart."""
        return _signature(*self.watched), requirements.installed_stamp()

    def suspend(self, slug: str, reason: str, until: float | None = None) -> None:
        """Serve the model as unavailable, with the reason, until its recipe's files change (its recipe process
        could not start: compute/pool.py), or until the epoch time `until` (a run of it hung)."""
        with self.lock:
            model = self.loaded.models.get(slug)
            if model is None:
                return
            self.suspended[slug] = (model.recipe_sha256, reason, until)
            self.catalog = self._without_suspended()

    def _without_suspended(self) -> Catalog:
        """The catalog as loaded with each model suspended moved to the unavailable ones, while its files are those
        it was suspended with and its time lasts (a new Catalog, so that nothing made from the old one is served)."""
        catalog, now = self.loaded, time.time()
        self.suspended = {slug: (digest, reason, until) for slug, (digest, reason, until) in self.suspended.items()
                      if slug in catalog.models and catalog.models[slug].recipe_sha256 == digest
                      and (until is None or until > now)}
        if not self.suspended:
            return catalog
        return Catalog({slug: m for slug, m in catalog.models.items() if slug not in self.suspended},
                       catalog.unavailable | {slug: Unavailable(slug, _why_suspended(reason, until), until)
                                              for slug, (_, reason, until) in self.suspended.items()})


def _why_suspended(reason: str, until: float | None) -> str:
    if until is None:
        return f"its recipe process could not start: {reason}; it is tried again when its files change"
    when = time.strftime("%H:%M:%S UTC", time.gmtime(until))
    return f"{reason}; it is suspended until {when} or a change to its files"
