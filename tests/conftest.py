import json
import os
import shutil
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# One torch thread in each test process, as in the recipe processes and the recordings: two pytest workers on two
# cores with torch's default (a thread per core each) oversubscribe the cores, and its threads spin waiting for
# one another (a replay took 3.2 s instead of 1.6 s beside a busy neighbour). Set before any test imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from app import create_app
from app.domain.catalog import apply_keys, apply_op_names
from app.domain.recipes import load_module, read_metadata
from app.services.config import PROJECT_ROOT, TestConfig
from app.services.parts import parts

from .browsing import browser, live_server, watched  # noqa: F401 (the browser tests' fixtures, for every module)

BERT_MANIFEST = PROJECT_ROOT / "manifests" / "bert" / "manifest.json"
BERT_RECIPE = PROJECT_ROOT / "recipes" / "bert"
GPT_RECIPE = PROJECT_ROOT / "recipes" / "gpt"
LENET_RECIPE = PROJECT_ROOT / "recipes" / "lenet"
# Every model of the catalog, by slug: per-model tests follow the manifests folder, so a new model needs no test edit.
CATALOG_SLUGS = sorted(p.name for p in (PROJECT_ROOT / "manifests").iterdir() if (p / "manifest.json").is_file())


def _lab_replays_a_case(slug: str) -> bool:
    from app.domain.labs import KINDS

    manifest = json.loads((PROJECT_ROOT / "manifests" / slug / "manifest.json").read_text())
    lab = read_metadata(PROJECT_ROOT / "recipes" / slug).get("lab")
    # A kind whose every endpoint answers a result of its own (the DataLab's trace), not a case, replays none.
    answers_cases = lab is not None and set(lab.get("endpoints", {})) - set(KINDS[lab["kind"]].results)
    return bool(answers_cases) and bool(manifest["experiment"]["cases"])


# The models whose lab starts by replaying a recorded case (the others trace a result of their own or have no lab).
RECORDED_LAB_SLUGS = [slug for slug in CATALOG_SLUGS if _lab_replays_a_case(slug)]


def bert_manifest() -> dict:
    """The seed manifest, with each item's key and each unnamed op's name from the recipe (as the catalog
    gives them)."""
    manifest = json.loads(BERT_MANIFEST.read_text())
    meta = read_metadata(BERT_RECIPE)
    apply_keys(manifest, meta["recording"]["keys"])
    apply_op_names(manifest, meta["graph"]["ops"])
    return manifest


def check_bounded_cache(store) -> None:
    """The same cap for either store: 50 values of 1 KB under a 10 KB cap keep the latest to expire, a
    job is never evicted, and a value over the per-entry cap is not kept (stores made with 10_000 / 4_000)."""
    store.set("job", {"state": "running"}, ttl=60)
    for i in range(50):
        store.set(f"report-{i}", {"values": "x" * 1_000, "i": i}, ttl=60 + i, cached=True)
    assert store.cached_bytes() <= 10_000
    assert store.get("report-49")["i"] == 49 and store.get("report-0") is None  # nearest expiry went first
    assert store.get("job") == {"state": "running"}
    store.set("huge", {"values": "x" * 5_000}, ttl=60, cached=True)
    assert store.get("huge") is None  # over the per-entry cap: served, never cached


def eventually(ask: Callable[[], Any], until: Callable[[Any], bool] = bool, seconds: float = 30.0,
               every: float = 0.05) -> Any:
    """ask()'s first answer that `until` holds for, asked again every `every` seconds: an event another process or
    thread brings about (a job done), awaited rather than slept for. AssertionError with the last answer after
    `seconds`. The one way a test polls."""
    deadline = time.monotonic() + seconds
    while not until(answer := ask()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still {str(answer)[:500]} after {seconds:g} s")
        time.sleep(every)
    return answer


class Clock:
    """A clock a test moves: epoch seconds for a store where time is the subject."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def check_sliding_budget(make_store) -> None:
    """At most `limit` hits are admitted in any span of `window` seconds, across the boundary a fixed window would
    reset at; a refused hit is told how long until one is admitted, and is then. `make_store(clock)` makes the
    store on a clock this moves, in steps a binary fraction can hold exactly (so the window's edges are exact)."""
    clock, window, step = Clock(), 60.0, 60.0 / 16
    store = make_store(clock)
    start = clock.now
    admitted = []
    for _ in range(40):  # two and a half windows, a hit every sixteenth of one
        if store.admit("client", 5, window) == 0:
            admitted.append(round((clock.now - start) / step))
        clock.now += step
    # Five in the first steps; then none until the first of them has left, one window later, and so on. A fixed
    # window of whole minutes would have reset 20 s in (the clock starts 40 s into one), at step 6, and let five
    # more in at once: ten within 7 steps.
    assert admitted == [0, 1, 2, 3, 4, 16, 17, 18, 19, 20, 32, 33, 34, 35, 36]
    assert all(admitted[k + 5] - admitted[k] >= 16 for k in range(len(admitted) - 5))  # no span holds six
    for _ in range(5):
        store.admit("other", 5, window)
        clock.now += step
    wait = store.admit("other", 5, window)  # the first of the five left after a window: 11 steps from now
    assert wait == window - 5 * step
    clock.now += wait - step / 2
    assert store.admit("other", 5, window) == step / 2  # still half a step early
    clock.now += step / 2
    assert store.admit("other", 5, window) == 0


def check_units_and_lists(store) -> None:
    """A charge of several units is admitted whole or not at all (and says when it will be); a list keeps its last
    `limit` values, oldest first, every push from several threads at once kept (stores made with 10_000 / 4_000); a
    key is deleted only while it holds the value given."""
    assert store.admit("client", 10, 60.0, units=6) == 0
    wait = store.admit("client", 10, 60.0, units=6)  # 12 would pass 10: refused, nothing counted
    assert 59 < wait <= 60.0
    assert store.admit("client", 10, 60.0, units=4) == 0 and store.admit("client", 10, 60.0) > 0
    assert store.admit("client", 10, 60.0, units=11) == float("inf")  # more than the whole budget: never
    threads = [threading.Thread(target=lambda n=n: [store.push("history", {"n": n, "i": i}, 25, 60) for i in range(5)])
               for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = store.items("history")
    assert len(kept) == 20 and sorted((k["n"], k["i"]) for k in kept) == [(n, i) for n in range(4) for i in range(5)]
    for i in range(30):
        store.push("history", {"n": 9, "i": i}, 25, 60)
    assert [k["i"] for k in store.items("history")] == list(range(5, 30))  # the last 25, oldest first
    assert store.items("none") == []
    # A place handed from holder to holder: deleted only by the holder it names, however late a release comes.
    assert store.add("place", "job-a", 60) and not store.delete_if("place", "job-b")
    assert store.delete_if("place", "job-a") and store.add("place", "job-b", 60)
    assert not store.delete_if("place", "job-a") and store.get("place") == "job-b"
    assert not store.delete_if("never", "job-a")


def kept_stages(path: Path) -> dict:
    """The weights a recipe's train.py kept on the way (stages named epoch-<n>), by epoch, as the server reads them."""
    from app.compute.training_stages import read_snapshots

    _, _, weights = read_snapshots(path)
    return {int(stage.removeprefix("epoch-")): state for stage, state in weights.items()}


def largest_stage_difference(snapshots: dict, stored: dict) -> tuple[float, tuple]:
    """How far a retraining's stages are from the stored ones: the largest |difference| and where (epoch, tensor)."""
    return max(((value - stored[epoch][name]).abs().max().item(), (epoch, name))
               for epoch, state in snapshots.items() for name, value in state.items())


def recipe_module(recipe_dir: Path, module: str):
    """A recipe file imported as the worker imports it: inside its slug-qualified package."""
    return load_module(recipe_dir, module)


class ModelTree:
    """A manifests/ and recipes/ pair in a temporary folder, for apps that serve altered models."""

    def __init__(self, root: Path) -> None:
        self.manifests = root / "manifests"
        self.recipes = root / "recipes"
        self.manifests.mkdir()
        self.recipes.mkdir()

    def add(self, slug: str, manifest: dict | bytes | None = None, run_py: str | None = None,
            lab_py: str | None = None) -> None:
        """A model folder: the BERT manifest (or the one given, as JSON or raw bytes) and recipe."""
        folder = self.manifests / slug
        folder.mkdir()
        if manifest is None:
            manifest = bert_manifest() | {"slug": slug}
        raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        (folder / "manifest.json").write_bytes(raw)
        shutil.copytree(BERT_RECIPE, self.recipes / slug, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
        if run_py is not None:
            (self.recipes / slug / "run.py").write_text(run_py)
        if lab_py is not None:
            (self.recipes / slug / "lab.py").write_text(lab_py)

    def copy(self, slug: str) -> tuple[Path, Path]:
        """The catalog's model `slug` as it stands, copied in: its manifest file and recipe folder here."""
        shutil.copytree(PROJECT_ROOT / "manifests" / slug, self.manifests / slug)
        shutil.copytree(PROJECT_ROOT / "recipes" / slug, self.recipes / slug,
                        ignore=shutil.ignore_patterns("__pycache__"))
        return self.manifests / slug / "manifest.json", self.recipes / slug

    def config(self, **extra) -> dict:
        return {"MANIFESTS_DIR": str(self.manifests), "RECIPES_DIR": str(self.recipes)} | extra


@pytest.fixture(scope="session", autouse=True)
def no_outside_checkpoints(tmp_path_factory):
    """Checkpoints come only from what a test sets: not from the environment nor a real Hugging Face cache."""
    saved = {k: os.environ.pop(k, None) for k in ("TENSORVIZ_BERT_CHECKPOINT", "HF_HUB_CACHE", "HF_HOME")}
    os.environ["HF_HUB_CACHE"] = str(tmp_path_factory.mktemp("empty-hub-cache"))
    yield
    for key, value in saved.items():
        os.environ.pop(key, None)
        if value is not None:
            os.environ[key] = value


@pytest.fixture(scope="session")
def bert_checkpoint(tmp_path_factory) -> Path:
    """A small random uncased BertForMaskedLM in model.safetensors, saved by transformers."""
    from .bert_checkpoints import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("bert-checkpoint"))


MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # all-MiniLM-L6-v2's weights


@pytest.fixture(scope="session")
def packaged_checkpoint() -> Path:
    """The real all-MiniLM-L6-v2 that the test set-up unpacks (`make checkpoints`, run by `make setup-test`), where
    every test app finds it (CHECKPOINTS_DIR) unless a test sets another checkpoint or none."""
    from app.domain.checkpoints import file_sha256
    from app.services.config import Config

    folder = Path(Config.CHECKPOINTS_DIR) / "all-MiniLM-L6-v2"
    if not (folder / "model.safetensors").is_file():
        pytest.fail(f"{folder} is missing: run `make checkpoints` (make setup-test does)")
    assert file_sha256(folder / "model.safetensors") == MINILM_SHA256
    return folder


@pytest.fixture(scope="session")
def gpt2_checkpoint(tmp_path_factory) -> Path:
    """A small random GPT2LMHeadModel with its byte-level BPE tokenizer, saved by transformers."""
    from .gpt2_checkpoints import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("gpt2-checkpoint"))


@pytest.fixture(scope="session")
def made_checkpoint() -> Path:
    """The project's own GPT-2-layout checkpoint (the gpt recipe written by its export.py), which the test set-up
    writes (`make checkpoints`) where every test app finds it (CHECKPOINTS_DIR), and gpt2's recording was made from."""
    from app.domain.checkpoints import file_sha256
    from app.services.config import Config

    folder = Path(Config.CHECKPOINTS_DIR) / "sorting-gpt"
    declared = tomllib.loads((PROJECT_ROOT / "recipes" / "gpt2" / "recipe.toml").read_text())["checkpoint"]["made"]
    for name, sha256 in declared["sha256"].items():
        if not (folder / name).is_file():
            pytest.fail(f"{folder / name} is missing: run `make checkpoints` (make setup-test does)")
        assert file_sha256(folder / name) == sha256
    return folder


@pytest.fixture
def packaged_app(request, make_app):
    """The app where every model that reads a checkpoint has the one its recording was made from: the packaged
    all-MiniLM-L6-v2 for bert-base, the project's own digit sorter for gpt2. A test of one model (its `slug`
    parameter) whose recipe reads no checkpoint needs neither unpacked."""
    app = make_app(TestConfig)
    slug = request.node.callspec.params.get("slug") if hasattr(request.node, "callspec") else None
    if slug is None or "checkpoint" in tomllib.loads((PROJECT_ROOT / "recipes" / slug / "recipe.toml").read_text()):
        folders = [request.getfixturevalue(name) for name in ("packaged_checkpoint", "made_checkpoint")]
        assert app.config["CHECKPOINTS_DIR"] == str(folders[0].parent) == str(folders[1].parent)
    return app


def lab_subject(model) -> dict:
    """What to run a model's What if? on: its first recorded case, else (a recording made without its checkpoint)
    its lab kind's example request for the first endpoint that makes one."""
    cases = model.manifest["experiment"]["cases"]
    if cases:
        return {"case": cases[0]["id"]}
    for name in model.lab.endpoints:
        request = model.lab.kind.example(name, [], model.lab)
        if request is not None:
            return {"request": request, "endpoint": name}
    raise AssertionError(f"{model.slug}: no recorded case and no example request")


@pytest.fixture
def masked_lm_app(bert_checkpoint, make_app):
    """The app with BERT_CHECKPOINT set to the small random checkpoint with the MLM head."""
    app = make_app(TestConfig)
    app.config["BERT_CHECKPOINT"] = str(bert_checkpoint)
    return app


@pytest.fixture
def train_check(monkeypatch, request):
    """A recipe's `train.py --check` exit status, with what its train() returns standing in for a retraining
    (a test module's one retraining, or the stored weights), so that main() compares as the command does."""
    import torch

    from recipekit import training

    deterministic = torch.are_deterministic_algorithms_enabled()
    request.addfinalizer(lambda: torch.use_deterministic_algorithms(deterministic))  # main() turns it on

    def check(train, retrained) -> int:
        monkeypatch.setattr(train, "train", lambda *split: retrained)
        return train.main(["--check"])

    # As on the machine that trained the stored weights, where a retraining must give their bits (or come within the
    # recipe's tolerance): elsewhere a changed weight may pass as another machine's training (test_retraining.py).
    monkeypatch.setattr(training, "trained_here", lambda made: True)

    return check


@pytest.fixture
def tree(tmp_path: Path) -> ModelTree:
    return ModelTree(tmp_path)


class Apps:
    """The one way a test makes an app: `apps(config)` is create_app(config) (a Config class, a mapping of
    settings, or None for the defaults read from the environment), and every app made is shut down (its recipe
    workers stopped) by `close()`, which the fixtures below call when their test, module or session ends."""

    def __init__(self) -> None:
        self.made: list = []

    def __call__(self, config: Any = TestConfig):
        app = create_app(config)
        self.made.append(app)
        return app

    def close(self) -> None:
        for app in self.made:
            parts(app).pool.shutdown()


@pytest.fixture
def make_app():
    """Apps a test makes with its own settings, shut down when it ends (Apps)."""
    apps = Apps()
    yield apps
    apps.close()


@pytest.fixture
def tree_app(tree, make_app):
    """Apps (TestConfig with the given settings) serving the tree's models, shut down after the test."""
    return lambda **settings: make_app(type("Tree", (TestConfig,), tree.config(**settings)))


@pytest.fixture(scope="module")
def module_apps():
    """Apps a test module's fixtures make (Apps), shut down when the module ends."""
    apps = Apps()
    yield apps
    apps.close()


@pytest.fixture(scope="module")
def module_app(module_apps):
    """One app for a test module (its recipe workers stay warm from one test to the next), shut down after it."""
    return module_apps(TestConfig)


@pytest.fixture(scope="module")
def module_client(module_app):
    return module_app.test_client()


@pytest.fixture
def app(make_app):
    return make_app(TestConfig)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()
