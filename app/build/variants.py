"""Variants: a model trained with a learner's knobs, recorded by the recorder from its own weights, and served as a
model of its own under its model's path.

    POST /api/models/<slug>/variants                   {"knobs": {"hidden": 8}}: the kept variant (200), or the job
                                                       that trains and records it (202, Location)
    GET  /api/models/<slug>/variants/jobs/<job id>     the job: the loss, the recipe's metrics and pictures so far
    GET  /api/models/<slug>/variants/<id>              its manifest; every model route answers under this path too
    /models/<slug>/variants/<id>                       its page

The same knobs give the same variant: its id hashes the model's recipe files (the kit's too), torch and every
knob's value, and a second request for it joins the job that makes it, or is answered the kept one. train.py runs
with the knobs in a process of its own (compute/retraining.py, as a retraining does), in one of the machine's places
to train (services/places.py: queued, a client's budget, one at a time per client), stopped past VARIANT_TIMEOUT.
Its files are then laid over a copy of the recipe folder and recorded (build_recording, `variant`), and kept in the
shared state, so that every web process (every machine, with Redis) serves it: each unpacks a variant it is asked
for into VARIANTS_DIR once. VARIANTS_KEPT are kept, at most VARIANTS_MAX_BYTES together, and at most
VARIANTS_PER_CLIENT of those one client trained: past a bound the least recently used go first, of the client past
its own bound, or of those that keep the most, so that no client's trainings push out the variants others keep;
each goes at the latest VARIANT_KEEP_SECONDS after it was made. A link to one that went answers 404 saying so, and
its files go from the shared state and from this machine's folder (another machine's, at its next keep or start).
What a process was recording or unpacking when it died (a restart) is removed when a process starts.
"""

import base64
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from flask import Flask, current_app, request

from recipekit.knobs import KnobError, chosen, moved

from ..compute.errors import RecipeError, RecipeTimeout
from ..compute.retraining import Cancelled, RetrainCall
from ..domain.catalog import MANIFEST_NAME, Model, read_model
from ..domain.labs.fields import FieldError
from ..domain.schema import ManifestError
from ..services import places
from ..services.extensions import models, state, workers
from ..services.jobs import Jobs, rfc3339
from ..services.parts import parts
from ..services.refusals import ModelMissing
from ..services.retraining import trained_here, training_needs
from ..services.runs import torch_version
from ..services.state import StateUnavailable
from .recorder import RecordingError, build_recording, write_recording

PATH = "{slug}/variants/{id}"  # where a variant is served, under its model's slug
INDEX = "variants-kept"  # [[slug, id, created, bytes, client], ...], the oldest first: what the bounds evict
INDEX_LOCK = "variants-kept-lock"  # held while one process rewrites the index, so that no two lose each other's entry
LOADED = 16  # variants each process holds loaded (a Model each), the most recently asked for
USE_EVERY = 60.0  # seconds: a variant's last use is written at most this often by each process
STAGING = ".staging-"  # VARIANTS_DIR/.staging-<pid>-…: a variant being recorded or unpacked by the process <pid>


@dataclass(frozen=True)
class Variant:
    """A kept variant as its record says: which model (and the hash of the recipe it was trained from), its id,
    every knob's value and those moved, when it was made, how long it trained and was recorded, its curves, what it
    trained on and the bytes of its files."""

    slug: str
    recipe: str
    id: str
    knobs: dict
    moved: dict
    created: float
    train_seconds: float
    record_seconds: float
    curves: list
    environment: dict | None
    bytes: int

    @property
    def path(self) -> str:
        return PATH.format(slug=self.slug, id=self.id)

    def public(self) -> dict:
        return {"model": self.slug, "id": self.id, "knobs": self.knobs, "moved": self.moved,
                "created_at": rfc3339(self.created), "train_seconds": round(self.train_seconds, 3),
                "record_seconds": round(self.record_seconds, 3), "bytes": self.bytes,
                "page": f"/models/{self.path}", "manifest": f"/api/models/{self.path}",
                "verifications": f"/api/models/{self.path}/verifications"}


def split(slug: str) -> tuple[str, str] | None:
    """A variant's path ("mlp/variants/<id>") as its model's slug and its id; None for a model's own slug."""
    model, sep, variant = slug.partition("/variants/")
    return (model, variant) if sep else None


def is_variant(slug: str, **_) -> bool:
    """Whether a model path is a variant's, whose answers read the shared state (kept, or gone to make room) and so
    are never kept whole as the catalog's models' are (@cacheable's `unless`)."""
    return split(slug) is not None


def _record_key(slug: str, variant_id: str) -> str:
    return f"variant:{slug}:{variant_id}"


def _files_key(slug: str, variant_id: str) -> str:
    return f"variant-files:{slug}:{variant_id}"


def _used_key(slug: str, variant_id: str) -> str:
    return f"variant-used:{slug}:{variant_id}"


def client_of(address: str | None) -> str:
    """The client a variant is counted against, as the index names it: a digest of its address, never the address."""
    return hashlib.sha256((address or "unknown").encode()).hexdigest()[:16]


def knob_values(model: Model, body: dict) -> dict:
    """Every knob's value for this request's `knobs` (the defaults for those not given): FieldError naming the knob
    that is unknown or out of its range, in the words train.py refuses it with, or saying that none moved."""
    if not model.knobs:
        raise FieldError(f"knobs: model {model.slug!r} declares no knobs to train a variant with")
    given = body.get("knobs", {})
    if not isinstance(given, dict):
        raise FieldError("knobs: must be an object of knob names and values")
    try:
        values = chosen(model.knobs, given)
    except KnobError as exc:
        raise FieldError(f"knobs.{exc}") from None
    if not moved(model.knobs, values):  # the recorded model, which is served already
        raise FieldError(f"knobs: move at least one knob from its default (its knobs: {', '.join(model.knobs)}); "
                         f"at their defaults they train the recorded model, /models/{model.slug}")
    return values


def variant_id(model: Model, values: dict) -> str:
    """The variant of these knobs: the model's recipe files (weights, train.py, the kit), torch and every knob's
    value decide its weights, so they name it."""
    named = json.dumps({"recipe": model.recipe_sha256, "torch": torch_version(), "knobs": values}, sort_keys=True)
    return hashlib.sha256(named.encode()).hexdigest()[:16]


def kept(slug: str, variant_id: str) -> Variant | None:
    """The kept variant's record, or None (never made, or gone to make room)."""
    record = state.store.get(_record_key(slug, variant_id))
    return Variant(**record) if record is not None else None


def kept_of(model: Model) -> list[Variant]:
    """The variants of this model that are kept, the newest first."""
    index = state.store.get(INDEX) or []
    found = [kept(slug, variant_id) for slug, variant_id, *_ in reversed(index) if slug == model.slug]
    return [v for v in found if v is not None]


def _folder(slug: str, variant_id: str) -> Path:
    """Where this process unpacks a variant: its recipe folder at <slug>/<id>/recipe, as the compute workers find
    its model's name (compute/variant_folders.py), and its recording beside it at <slug>/<id>/manifest."""
    return Path(parts().variants_dir) / slug / variant_id


def _staging() -> Path:
    """A folder of this process's own in VARIANTS_DIR, for a variant it records or unpacks: renamed into place whole,
    and removed by the next process to start where this one died first."""
    root = Path(parts().variants_dir)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=root))


def sweep(root: Path, kept_paths: set[tuple[str, str]] | None = None) -> None:
    """Remove from VARIANTS_DIR the staging folders of processes that no longer run and, where `kept_paths` is
    given, the unpacked variants no longer kept."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.name.startswith(STAGING):
            pid = entry.name[len(STAGING):].split("-", 1)[0]
            if not pid.isdigit() or not _alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)
        elif kept_paths is not None and entry.is_dir() and not entry.is_symlink():
            for unpacked in entry.iterdir():
                # One another process is keeping has its record before its place in the index: left to it.
                if (entry.name, unpacked.name) not in kept_paths and kept(entry.name, unpacked.name) is None:
                    shutil.rmtree(unpacked, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _lay_out(folder: Path, model: Model | None, files: dict[str, str]) -> None:
    """Make `folder` with the model's recipe files (where a model is given) and `files` (base64 by name) over them:
    a variant's recipe folder, or its recording."""
    folder.mkdir()
    for name in model.recipe_file_names if model else ():
        (folder / name).write_bytes(model.files[name].content)
    for name, content in files.items():
        (folder / name).write_bytes(base64.b64decode(content))


def _unpack(model: Model, variant: Variant, again: bool = False) -> Path:
    """The variant's folder on this machine (recipe/ and manifest/), unpacked from the shared state once: the model's
    recipe files with the variant's own laid over them, and its recording. `again`: the folder found could not be
    read, so it is unpacked afresh."""
    folder = _folder(model.slug, variant.id)
    if again:
        shutil.rmtree(folder, ignore_errors=True)
    if (folder / "manifest" / MANIFEST_NAME).is_file():
        return folder
    files = state.store.get(_files_key(model.slug, variant.id))
    if files is None:
        raise ModelMissing(_gone_message(model.slug, variant.id))
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = _staging()
    _lay_out(staging / "recipe", model, files["recipe"])
    _lay_out(staging / "manifest", None, files["manifest"])
    if folder.exists() and not (folder / "manifest" / MANIFEST_NAME).is_file():
        shutil.rmtree(folder, ignore_errors=True)  # a folder left part-made (a copy cut short): made again
    try:
        os.rename(staging, folder)  # whole or not at all: another process unpacking it too loses the race quietly
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _used(variant: Variant) -> None:
    """Note that the variant was asked for now (at most once a USE_EVERY per process): the bounds evict by it."""
    loaded = parts().variants
    now = time.time()
    with loaded.lock:
        if now - loaded.used.get(variant.path, 0.0) < USE_EVERY:
            return
        loaded.used[variant.path] = now
    state.store.set(_used_key(variant.slug, variant.id), now, current_app.config["VARIANT_KEEP_SECONDS"])


def _gone_message(slug: str, variant_id: str) -> str:
    return (f"no variant {variant_id!r} of {slug!r} is kept: it was never trained, or it went to make room for "
            f"newer ones (this server keeps {current_app.config['VARIANTS_KEPT']}); train it again with its knobs "
            f"(POST /api/models/{slug}/variants)")


def model_or_404(slug: str) -> Model:
    """The model with this slug, or the variant at this path ("mlp/variants/<id>") as a model of its own; ModelMissing
    (404) saying why there is none."""
    found = split(slug)
    if found is None:
        return models.get_or_404(slug)
    parent = models.get_or_404(found[0])
    variant = kept(parent.slug, found[1])
    if variant is None:
        shutil.rmtree(_folder(parent.slug, found[1]), ignore_errors=True)  # gone from the shared state: here too
        with parts().variants.lock:
            parts().variants.models.pop(PATH.format(slug=parent.slug, id=found[1]), None)
        raise ModelMissing(_gone_message(parent.slug, found[1]))
    if variant.recipe != parent.recipe_sha256:
        raise ModelMissing(f"variant {variant.id!r} of {parent.slug!r} was trained from files of its recipe that have "
                           f"changed since; train it again with its knobs (POST /api/models/{parent.slug}/variants)")
    _used(variant)
    loaded = parts().variants
    with loaded.lock:
        model = loaded.models.get(variant.path)
    if model is not None:
        return model
    for again in (False, True):  # a folder that cannot be read (left part-made, changed on disk) is unpacked again
        folder = _unpack(parent, variant, again)
        try:
            model = read_model(parent.slug, folder / "manifest", folder / "recipe", served_as=variant.path)
            break
        except ManifestError as exc:
            if again:
                raise ModelMissing(f"variant {variant.id!r} of {parent.slug!r} cannot be served: {exc}") from None
    with loaded.lock:
        loaded.models[variant.path] = model
        while len(loaded.models) > LOADED:
            loaded.models.pop(next(iter(loaded.models)))
    return model


def _keep(model: Model, variant: Variant, files: dict, client: str) -> None:
    """Keep the variant in the shared state for `client` (client_of), and make room: past VARIANTS_PER_CLIENT of
    its client's, that client's least recently used go; past VARIANTS_KEPT or VARIANTS_MAX_BYTES together, the least
    recently used of the clients that keep the most (_next_to_go); past VARIANT_KEEP_SECONDS, any. Each goes whole:
    its record, its files, its last use and this machine's unpacked folder."""
    config = current_app.config
    ttl = config["VARIANT_KEEP_SECONDS"]
    state.store.set(_files_key(model.slug, variant.id), files, ttl)
    state.store.set(_record_key(model.slug, variant.id), variant.__dict__, ttl)
    state.store.set(_used_key(model.slug, variant.id), variant.created, ttl)
    with state.store.locked(INDEX_LOCK):
        index = [entry for entry in state.store.get(INDEX) or [] if entry[:2] != [model.slug, variant.id]]
        index.append([model.slug, variant.id, variant.created, variant.bytes, client])
        gone = [entry for entry in index if time.time() - entry[2] >= ttl]
        index = [entry for entry in index if entry not in gone]
        used = {(e[0], e[1]): state.store.get(_used_key(e[0], e[1])) or e[2] for e in index}
        index.sort(key=lambda e: used[(e[0], e[1])])  # the least recently used first: the first to go
        own = [entry for entry in index if entry[4:] == [client]]
        for entry in own[:max(0, len(own) - config["VARIANTS_PER_CLIENT"])]:
            index.remove(entry)
            gone.append(entry)
        while len(index) > config["VARIANTS_KEPT"] or sum(e[3] for e in index) > config["VARIANTS_MAX_BYTES"]:
            gone.append(index.pop(index.index(_next_to_go(index))))
        for slug, old, *_ in gone:
            for key in (_record_key(slug, old), _files_key(slug, old), _used_key(slug, old)):
                state.store.delete(key)
        state.store.set(INDEX, sorted(index, key=lambda e: e[2]), ttl)
    sweep(Path(parts().variants_dir), {(e[0], e[1]) for e in index})


def _next_to_go(index: list) -> list:
    """The entry that makes room past the machine's bounds: the least recently used (`index` is in that order) of
    the clients that keep the most, so that the ones who train most give up theirs first."""
    counts = Counter(tuple(entry[4:]) for entry in index)
    most = max(counts.values())
    return next(entry for entry in index if counts[tuple(entry[4:])] == most)


def make(model: Model, values: dict, variant_id: str, record: dict, client: str) -> dict:
    """Train the variant, telling the job's pollers its curves and pictures as they grow, record it from its weights
    and keep it for `client`; always a report."""
    config = current_app.config
    report: dict = {"model": model.slug, "id": variant_id, "knobs": values, "moved": moved(model.knobs, values)}
    holder = variants.job_key(record["id"])
    try:
        variants.made_known(record, state="queued")
        places.take(holder, lambda: variants.cancelled(record["id"]), config["VARIANT_TIMEOUT"])
        variants.made_known(record, state="running", started=time.time())
        call = RetrainCall(model.recipe_dir, config["VARIANT_TIMEOUT"], config["RECIPE_MEMORY_MB"], knobs=values)
        reply = workers.pool.retrain(call, lambda progress: variants.made_known(record, progress=progress),
                                     lambda: variants.cancelled(record["id"]))
        variants.made_known(record, progress=reply.progress, stage="recording")
        started = time.perf_counter()
        staging = _staging()
        try:
            recipe = staging / model.slug / variant_id / "recipe"  # laid out as it is served (_folder)
            recipe.parent.mkdir(parents=True)
            _lay_out(recipe, model, reply.files)
            path = PATH.format(slug=model.slug, id=variant_id)
            recording = build_recording(model.slug, recipe, workers.pool, config["RECIPE_SEED"], config,
                                        variant=path)
            written = write_recording(recording, staging / "manifest")
            files = {"recipe": reply.files,
                     "manifest": {p.name: base64.b64encode(p.read_bytes()).decode() for p in written}}
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        curves = (reply.progress or {}).get("curves", [])
        variant = Variant(model.slug, model.recipe_sha256, variant_id, values, report["moved"], time.time(),
                          reply.compute_seconds, time.perf_counter() - started, curves, reply.environment,
                          sum(len(c) for group in files.values() for c in group.values()))
        if variants.cancelled(record["id"]):  # asked while it was recorded: nothing is kept
            raise Cancelled("cancelled while it was recorded")
        _keep(model, variant, files, client)
    except Cancelled as exc:
        return report | {"status": "cancelled", "message": f"you cancelled this variant ({exc}); nothing was kept"}
    except (RecipeTimeout, RecipeError, RecordingError, StateUnavailable) as exc:
        return report | {"status": "error", "message": str(exc)}
    return report | {"status": "made", "variant": variant.public()}


@dataclass
class Loaded:
    """The variants this process has loaded, by path (Model each), and when it last noted each one's use."""

    models: dict
    lock: threading.Lock
    used: dict


class Variants(Jobs):
    """Flask extension: variant jobs, joined and polled from any process; the variants kept."""

    known = ("progress", "stage")
    queues_itself = True  # queued until it holds one of the machine's places (places.take)

    def __init__(self) -> None:
        super().__init__("variant", "api.variant_job", threads=places.WAITING_THREADS)

    def init_app(self, app: Flask) -> None:
        super().init_app(app)
        folder = app.config["VARIANTS_DIR"] or tempfile.mkdtemp(prefix="tensorviz-variants-")
        parts(app).variants_dir = str(folder)
        parts(app).variants = Loaded({}, threading.Lock(), {})
        sweep(Path(folder))  # what a process that died while recording or unpacking left

    def start(self, model: Model, body: dict) -> tuple[Variant | None, dict | None, str | None]:
        """The kept variant of the body's knobs, or the job that makes it (one already making it, in any process, or
        a new one) with the token that cancels it for the client that started it; FieldError naming a knob refused,
        before anything starts."""
        if not trained_here(model):
            raise FieldError(f"model {model.slug!r} is not trained by its recipe (no train.py): it has no variants")
        values = knob_values(model, body)
        training_needs(model)
        found_id = variant_id(model, values)
        found = kept(model.slug, found_id)
        if found is not None:
            return found, None, None
        client = client_of(request.remote_addr)
        job, token = self.start_owned(model, f"variant:{model.slug}:{found_id}",
                                      lambda record: make(model, values, found_id, record, client),
                                      admit=lambda job_id: places.admit_client(self.job_key(job_id), "variant"),
                                      limit=2 * current_app.config["VARIANT_TIMEOUT"] + 60,
                                      finished=lambda report: None)
        return None, job, token


variants = Variants()
