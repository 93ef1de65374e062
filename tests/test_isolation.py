"""No file, recipe or request can stop the server or another model: each bad file beside a good catalog makes its
own model unavailable with the reason (and every page and answer of the others stays up); a link out of a model's
folder is never followed; a recipe whose process cannot start is suspended; the state file keeps to its cap."""

import json
import os
import re
import time

import pytest

from app.compute.messages import RecipeCall, Warmup
from app.compute.pool import WorkerPool
from app.domain.catalog import load_catalog
from app.domain.graphlayout import ancestors
from app.services.config import PROJECT_ROOT, TestConfig
from app.services.parts import parts

from .conftest import BERT_MANIFEST, ModelTree, bert_manifest, eventually


def manifest_with(change):
    """The BERT manifest with a change, for the folder of a slug."""
    def made(slug: str) -> bytes:
        manifest = bert_manifest() | {"slug": slug}
        change(manifest)
        return json.dumps(manifest).encode()

    return made


def looped(manifest: dict) -> None:
    """Two modules, each the other's parent."""
    first, second = (layer for layer in manifest["layers"] if layer["kind"] == "module")
    first["parent"], second["parent"] = second["id"], first["id"]


def own_parent(manifest: dict) -> None:
    module = next(layer for layer in manifest["layers"] if layer["kind"] == "module")
    module["parent"] = module["id"]


# Each bad manifest, and what its model's reason says.
BAD_MANIFESTS = {
    "loop": (manifest_with(looped), "its parents form a loop"),
    "own-parent": (manifest_with(own_parent), "is its own ancestor"),
    "unknown-parent": (manifest_with(lambda m: m["layers"][3].update(parent="ghost")), "names no layer: 'ghost'"),
    "list-parent": (manifest_with(lambda m: m["layers"][3].update(parent=["a"])), "layers[3].parent"),
    "repeated-id": (manifest_with(lambda m: m["layers"].append(dict(m["layers"][3]))), "repeats id"),
    "dangling-edge": (manifest_with(lambda m: m["connections"].append(
        {"id": "x", "source": "input", "target": "ghost", "sourcePort": None, "targetPort": None})),
        "connections[48].target"),
    "papers-number": (manifest_with(lambda m: m["milestone"].update(papers=5)), "milestone.papers"),
    "string-matrix": (manifest_with(lambda m: m["experiment"]["cases"][0]["matrices"].insert(0, "x")),
                      "matrices[0]"),
    "manifest-year-text": (manifest_with(lambda m: m["milestone"].update(year="1997")), "milestone.year"),
    "manifest-no-year": (manifest_with(lambda m: m["milestone"].pop("year")), "milestone.year: is required"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
    "big-integer": (BERT_MANIFEST.read_bytes().replace(b'"schemaVersion": 1', b'"schemaVersion": 1' + b"0" * 5000),
                    "an integer of 5001 digits"),
    "no-steps": (manifest_with(lambda m: m.update(steps=[], openingStep=None)), "manifest.openingStep"),
}

# Each bad recipe.toml (a change to the BERT recipe's), and what its model's reason says.
BAD_DECLARATIONS = {
    "lab-kind-list": (('kind = "masked-lm"', 'kind = ["recurrent"]'), "lab.kind: must be text"),
    "sizes-number": (("sizes = { length", "sizes = 5\nsized = { length"), "lab.sizes: must be a table, not int 5"),
    "graph-text": (("[graph.ops]", 'graph = "x"\n[unused]'), "graph: must be a table, not str 'x'"),
    "typo-table": (("[graph.ops]", "[grahp.ops]"), "grahp: is not a key the schema knows (did you mean 'graph'?)"),
    "year-text": (("year = 2018", 'year = "1997"'), "milestone.year: must be an integer, not str '1997'"),
    "no-year": (("year = 2018\n", ""), "milestone.year: is required"),
    "no-experiment-kind": (('kind = "matrices"\n', ""), None),  # the default: no reason, served
    "not-toml": (("[lab]", "[lab"), "is not valid TOML"),
}


def bad_tree(tmp_path) -> ModelTree:
    tree = ModelTree(tmp_path)
    tree.add("bert")
    for slug, (made, _) in BAD_MANIFESTS.items():
        tree.add(slug, manifest=made if isinstance(made, bytes) else made(slug))
    for slug, ((old, new), _) in BAD_DECLARATIONS.items():
        tree.add(slug, manifest=bert_manifest() | {"slug": slug})
        toml = tree.recipes / slug / "recipe.toml"
        text = toml.read_text()
        assert old in text, (slug, old)
        toml.write_text(text.replace(old, new, 1))
    return tree


def test_each_bad_file_makes_its_own_model_unavailable_and_every_page_stays_up(make_app, tmp_path):
    tree = bad_tree(tmp_path)
    started = time.monotonic()
    catalog = load_catalog(tree.manifests, tree.recipes)
    assert time.monotonic() - started < 10
    reasons = {slug: u.reason for slug, u in catalog.unavailable.items()}
    for slug, (_, reason) in {**BAD_MANIFESTS, **BAD_DECLARATIONS}.items():
        if reason is None:
            assert slug in catalog.models, reasons.get(slug)
        else:
            assert reason in reasons[slug], (slug, reasons[slug])
    assert str(tmp_path) not in json.dumps(reasons)
    client = make_app(tree.config(TESTING=True)).test_client()
    for path in ("/", "/api/models", "/api/openapi.json", "/models/bert", "/models/bert/graph.json"):
        assert client.get(path).status_code == 200, path
    answer = client.get("/api/models").get_json()
    assert {u["slug"] for u in answer["unavailable"]} == {s for s, (_, r) in {**BAD_MANIFESTS,
                                                                               **BAD_DECLARATIONS}.items() if r}
    assert client.get("/models/loop").status_code == 503
    assert "its parents form a loop" in client.get("/api/models/loop").get_json()["error"]["message"]


def test_a_manifest_over_the_size_this_server_reads_is_unavailable_with_the_size(tmp_path):
    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("large", manifest=bert_manifest() | {"slug": "large", "description": "x" * 200_000})
    catalog = load_catalog(tree.manifests, tree.recipes, most_bytes=100_000)
    assert "bert" in catalog.models
    assert re.search(r"manifests/large/manifest.json holds [\d,]+ bytes, over the 100,000 this server reads",
                     catalog.unavailable["large"].reason)


def test_a_walk_of_parents_stops_at_a_loop():
    layers = {"a": {"parent": "b"}, "b": {"parent": "a"}, "c": {"parent": "c"}}
    assert ancestors(layers, "a") == ["b"] and ancestors(layers, "c") == []


@pytest.mark.parametrize("target", ["/etc/passwd", "/proc/self/environ"])
def test_a_link_out_of_a_model_folder_is_never_followed(make_app, tmp_path, target):
    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("linked")
    os.symlink(target, tree.recipes / "linked" / "secrets.txt")
    tree.add("linked-manifest")
    os.symlink(target, tree.manifests / "linked-manifest" / "preview.svg")
    client = make_app(tree.config(TESTING=True)).test_client()
    unavailable = {u["slug"]: u["reason"] for u in client.get("/api/models").get_json()["unavailable"]}
    assert unavailable == {
        "linked": "recipes/linked/secrets.txt is a link out of its folder; links may not leave it",
        "linked-manifest": "manifests/linked-manifest/preview.svg is a link out of its folder; links may not leave it"}
    body = client.get("/api/models/linked/files")
    assert body.status_code == 503 and "root:" not in body.get_data(as_text=True)
    for model in ("bert",):
        files = client.get(f"/api/models/{model}/files").get_json()["files"]
        assert all("root:" not in client.get(f["url"]).get_data(as_text=True) for f in files)


def test_a_link_inside_a_model_folder_is_followed(tmp_path):
    tree = ModelTree(tmp_path)
    tree.add("bert")
    (tree.recipes / "bert" / "notes.txt").write_text("kept beside the recipe")
    os.symlink("notes.txt", tree.recipes / "bert" / "also.txt")
    catalog = load_catalog(tree.manifests, tree.recipes)
    assert catalog.models["bert"].files["also.txt"].content == b"kept beside the recipe"


HANGING_LAB = "import time\ntime.sleep(3600)  # importing this recipe never ends\n"


def test_a_recipe_that_hangs_at_start_is_suspended_and_holds_no_other_run(make_app, tmp_path):
    """Its warm-up runs in idle time, bounded, one recipe at a time: the good model's first run answers in
    seconds; after two warm-ups ran past their bound the hanging model is unavailable with the reason, in this
    web process and, through the shared store, in another that never warmed it, until its files change."""
    from app.services.warmup import warm_up

    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("hangs", lab_py=HANGING_LAB)
    config = type("Hanging", (TestConfig,), tree.config(WARMUP_TIMEOUT=2.0, CATALOG_RELOAD_SECONDS=0.1,
                                                         STATE_PATH=str(tmp_path / "state.sqlite3")))
    app, other = make_app(config), make_app(config)  # two web processes sharing one store
    client = app.test_client()
    warm_up(app)
    began = time.monotonic()
    run = client.post("/api/models/bert/runs", json={"input_ids": [1, 4, 3, 2, 6, 2],
                                                       "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]})
    assert run.status_code == 200 and time.monotonic() - began < 10, run.get_json()
    eventually(lambda: client.get("/api/models/hangs").status_code, lambda status: status != 200)
    reason = client.get("/api/models/hangs").get_json()["error"]["message"]
    assert "its recipe process could not start: warming it ran past 2 s (2 times in a row)" in reason, reason
    assert "hangs" in {u["slug"] for u in client.get("/api/models").get_json()["unavailable"]}
    # Never warmed there: told through the store, which the other process reads at most once a second.
    told = eventually(lambda: other.test_client().get("/api/models/hangs"), lambda r: r.status_code == 503)
    assert "warming it ran past 2 s" in told.get_json()["error"]["message"]
    warm_up(other)
    assert str(tree.recipes / "hangs") in parts(other).pool.failing  # and its workers never warm it
    (tree.recipes / "hangs" / "lab.py").write_text((PROJECT_ROOT / "recipes" / "bert" / "lab.py").read_text())
    eventually(lambda: client.get("/api/models/hangs").status_code, lambda status: status == 200, seconds=10)
    assert client.get("/api/models/hangs").status_code == 200  # its files changed: served again
    eventually(lambda: other.test_client().get("/api/models/hangs").status_code, lambda s: s == 200)  # everywhere


def test_a_run_waits_behind_another_recipes_hanging_warm_up_no_longer_than_the_patience(make_app, tmp_path):
    """The one recipe process warms the hanging recipe (20 s to its bound) in time it would idle: a run of another
    model that comes meanwhile takes a recipe process of its own after RECIPE_PATIENCE instead of waiting."""
    from app.services.warmup import warm_up

    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("hangs", lab_py=HANGING_LAB)
    app = make_app(type("Warming", (TestConfig,), tree.config(WARMUP_TIMEOUT=20.0, RECIPE_WORKERS=1)))
    warm_up(app)
    pool = parts(app).pool
    eventually(lambda: pool.pids(), seconds=60)
    time.sleep(3.0)  # bert's warm-up is done; the hanging one's has begun
    began = time.monotonic()
    run = app.test_client().post("/api/models/bert/runs", json=BERT_RUN)
    assert run.status_code == 200, run.get_json()
    assert time.monotonic() - began < 10  # well before the 20 s the warm-up may take
    assert pool.warming()  # and that warm-up goes on


# bert's lab, whose live run never ends on an input that starts with 7 (its warm-up and its other runs are sound).
RUN_HANGS = (PROJECT_ROOT / "recipes" / "bert" / "lab.py").read_text() + """

_live_run = live_run


def live_run(input_ids, *args, **kwargs):
    if input_ids[:1] == [7]:
        import time

        time.sleep(3600)
    return _live_run(input_ids, *args, **kwargs)
"""
BERT_RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}


def test_a_run_that_hangs_costs_only_its_own_model(make_app, tmp_path):
    """Two runs of a model hang in a web process with one recipe worker: another model's run answers while they
    still hang (it waits behind another model's run for RECIPE_PATIENCE at most, then takes a worker of its own);
    past RECIPE_TIMEOUT the hung run is killed (504), the model suspended with the reason in this process and
    another (503 with Retry-After, its waiting run refused rather than hung in turn), and served again after
    RECIPE_SUSPEND_SECONDS."""
    import threading

    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("hangs", lab_py=RUN_HANGS)
    config = type("Hangs", (TestConfig,), tree.config(RECIPE_WORKERS=1, RECIPE_QUEUE=4, RECIPE_TIMEOUT=8.0,
                                                      RECIPE_SUSPEND_SECONDS=6.0,
                                                      STATE_PATH=str(tmp_path / "s.sqlite3")))
    app, other = make_app(config), make_app(config)
    client = app.test_client()
    hung = BERT_RUN | {"input_ids": [7, 4, 3, 2, 6, 2]}
    answers: list = []
    assert client.post("/api/models/hangs/runs", json=BERT_RUN).status_code == 200  # sound on other inputs
    threads = [threading.Thread(target=lambda body=body: answers.append(
        client.post("/api/models/hangs/runs", json=body))) for body in (hung, hung | {"mlm_positions": [3]})]
    for thread in threads:
        thread.start()
        time.sleep(0.5)
    began = time.monotonic()
    other_model = client.post("/api/models/bert/runs", json=BERT_RUN)
    took = time.monotonic() - began
    assert other_model.status_code == 200, other_model.get_json()
    assert not answers and all(t.is_alive() for t in threads), "bert's run waited for the hung runs"
    for thread in threads:
        thread.join(30)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [503, 504], [a.get_json() for a in answers]
    refused = next(a for a in answers if a.status_code == 503)  # waited behind its own model, then refused
    assert int(refused.headers["Retry-After"]) > 0 and "suspended" in refused.get_json()["error"]["message"]
    for each in (client, other.test_client()):  # told through the store to the process that never ran it
        suspended = eventually(lambda each=each: each.get("/api/models/hangs"), lambda r: r.status_code == 503)
        assert "did not finish in 8 s and was stopped" in suspended.get_json()["error"]["message"]
        assert int(suspended.headers["Retry-After"]) <= 6
        assert each.post("/api/models/bert/runs", json=BERT_RUN).status_code == 200
    listed = {u["slug"]: u["reason"] for u in client.get("/api/models").get_json()["unavailable"]}
    assert "suspended until" in listed["hangs"]
    back = eventually(lambda: client.post("/api/models/hangs/runs", json=BERT_RUN), lambda r: r.status_code == 200,
                      seconds=15)
    assert back.get_json()["cached"] is True or back.status_code == 200
    assert took < 8  # (the hung runs' timeout: bert's answer came well before it)


def test_a_pool_counts_a_warm_up_that_kills_its_process_against_its_recipe(tmp_path):
    recipe = tmp_path / "dies"
    recipe.mkdir()
    (recipe / "recipe.toml").write_text('[lab]\nkind = "causal-lm"\n'
                                        '[lab.endpoints.pid]\nmethod = "GET"\nentry = "pid"\n')
    (recipe / "lab.py").write_text("import os\nos._exit(3)  # importing it ends the process\n")
    suspend = []
    pool = WorkerPool(size=1, timeout=30, torch_threads=1, seed=0, warmup_timeout=5,
                      on_failing=lambda folder, reason: suspend.append((folder, reason)))
    try:
        pool.prestart([Warmup(str(recipe))])
        eventually(lambda: suspend)
        assert suspend == [(str(recipe), "its process died while warming it (exit code 3) (2 times in a row)")]
        replay = pool.run(RecipeCall.replay(PROJECT_ROOT / "recipes" / "mlp"))  # the others run on
        assert replay.result["checks"]
    finally:
        pool.shutdown()


def test_a_warm_up_killed_by_a_signal_is_tried_again_after_a_backoff_and_never_suspends(tmp_path):
    """The OOM killer's SIGKILL during a warm-up is no word of the recipe's: twice killed, the recipe is warmed again
    after a backoff (no suspension), and its third warm-up, which succeeds, clears the count."""
    recipe = tmp_path / "killed"
    recipe.mkdir()
    (recipe / "recipe.toml").write_text('[lab]\nkind = "causal-lm"\n'
                                        '[lab.endpoints.pid]\nmethod = "GET"\nentry = "pid"\n')
    tries = tmp_path / "tries"
    (recipe / "lab.py").write_text(f"import os, signal\nfrom pathlib import Path\ntries = Path({str(tries)!r})\n"
                                   "tries.write_text(tries.read_text() + 'x' if tries.exists() else 'x')\n"
                                   "if len(tries.read_text()) <= 2:\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    suspend = []
    pool = WorkerPool(size=1, timeout=30, torch_threads=1, seed=0, warmup_timeout=20,
                      on_failing=lambda folder, reason: suspend.append((folder, reason)))
    pool.BACKOFF_FIRST = 0.2
    try:
        pool.prestart([Warmup(str(recipe))])
        eventually(lambda: tries.exists() and len(tries.read_text()) == 3 and pool.warming() == 0, seconds=60)
        assert suspend == [] and str(recipe) not in pool.failing
        assert pool._backoff == {} and pool._failures == {}  # the third warm-up succeeded and cleared both
    finally:
        pool.shutdown()


def test_the_state_file_on_disk_stays_under_its_cap(tmp_path):
    from app.services.state import SQLiteStore

    path = tmp_path / "state.sqlite3"
    cap = 2 * 2**20
    store = SQLiteStore(str(path), max_bytes=cap, max_entry=64 * 1024)
    largest = 0
    for i in range(2000):  # 40 MB of distinct answers through a 2 MiB cap
        store.set(f"answer-{i}", {"values": "x" * (1000 + (i * 7919) % 30000), "i": i}, ttl=3600, cached=True)
        largest = max(largest, path.stat().st_size)
    assert largest <= cap and store.get("answer-1999")["i"] == 1999


@pytest.mark.processes
def test_gunicorn_with_every_bad_file_beside_a_good_catalog_answers_the_good_models_within_ten_seconds(tmp_path):
    """Every bad manifest and declaration above, a link out of a folder and a recipe that hangs at start, beside the
    BERT model: two gunicorn workers boot, answer its page and its first lab run in seconds, list every bad one as
    unavailable, and answer no 500."""
    import http.client

    from .test_processes import Gunicorn, call

    def status(path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()

    tree = bad_tree(tmp_path)
    tree.add("linked")
    os.symlink("/etc/passwd", tree.recipes / "linked" / "passwd.txt")
    tree.add("hangs", lab_py=HANGING_LAB)
    began = time.monotonic()
    server = Gunicorn(tree, workers=2, WARMUP_TIMEOUT=3)
    try:
        listed, _, catalog = call(server.port, "GET", "/api/models")
        page = status("/models/bert")
        assert (listed, page) == (200, 200) and time.monotonic() - began < 10
        run = call(server.port, "POST", "/api/models/bert/runs", {"input_ids": [1, 4, 3, 2, 6, 2],
                                                                   "segment_ids": [0, 0, 0, 0, 1, 1],
                                                                   "mlm_positions": [2]})
        assert run[0] == 200 and time.monotonic() - began < 20, run
        bad = {s for s, (_, r) in {**BAD_MANIFESTS, **BAD_DECLARATIONS}.items() if r} | {"linked"}
        assert bad <= {u["slug"] for u in catalog["unavailable"]}
        for path in ("/", "/api/openapi.json", "/models/loop", "/api/models/deep", "/models/hangs"):
            assert status(path) in (200, 503), path
    finally:
        server.stop()


SLOW_CASES_LAB = (PROJECT_ROOT / "recipes" / "bert" / "lab.py").read_text() + '''

_live_run = live_run


def live_run(**request):
    import time
    time.sleep(4)  # every run of this recipe takes seconds, its recorded cases' too
    return _live_run(**request)
'''


def test_a_recipe_whose_cases_take_long_to_keep_is_not_suspended(make_app, tmp_path):
    """Keeping the recorded cases is no start: past its time it is dropped for that recipe, which stays served, and a
    run asked while it was being kept is run by a fresh process."""
    from app.services.warmup import warm_up

    tree = ModelTree(tmp_path)
    tree.add("bert")
    tree.add("slow", lab_py=SLOW_CASES_LAB)
    app = make_app(type("Slow", (TestConfig,), tree.config(WARMUP_TIMEOUT=2.0)))
    client = app.test_client()
    warm_up(app)
    ran = client.post("/api/models/slow/runs", json={"input_ids": [1, 4, 3, 2, 6, 2],
                                                     "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]})
    assert ran.status_code == 200, ran.get_json()  # its keeping gave up in the run's process: a fresh one ran it
    eventually(parts(app).pool.warming, lambda n: n == 0, seconds=60)  # both warmed, the slow one's cases given up
    assert client.get("/api/models/slow").status_code == 200
    assert parts(app).pool.failing == {}
    assert client.post("/api/models/bert/runs", json={"input_ids": [1, 4, 3, 2, 6, 2],
                                                      "segment_ids": [0, 0, 0, 0, 1, 1],
                                                      "mlm_positions": [2]}).status_code == 200
