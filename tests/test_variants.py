"""A learner's variant: knobs moved, trained on the server with its progress polled, then recorded and served as a
model of its own (page, manifest, verification, What if?, lab, retraining), refused by knob name, bounded."""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.build.variants import model_or_404
from app.domain.compare import compare_checks
from app.domain.shapes import Variant, VariantJob, validator
from app.services.config import TestConfig
from app.services.parts import parts
from recipekit import knobs

from .conftest import eventually

MOVED = {"hidden": 3, "data": "circles", "steps": 600}  # a quick variant: 600 steps of a 3-unit network


def made(client, knobs_given: dict) -> tuple[dict, list[dict]]:
    """The variant these knobs make, trained through the API, and every poll of its job on the way."""
    response = client.post("/api/models/mlp/variants", json={"knobs": knobs_given})
    if response.status_code == 200:
        return response.get_json(), []
    assert response.status_code == 202, response.get_json()
    assert response.headers["Retry-After"] == "1"
    polls = []

    def poll() -> dict:
        job = client.get(response.headers["Location"]).get_json()
        polls.append(job)
        return job

    job = eventually(poll, lambda j: j["state"] == "done", seconds=180, every=0.2)
    validator(VariantJob).validate_python(job)
    assert job["report"]["status"] == "made", job["report"]
    return job["report"]["variant"], polls


@pytest.fixture(scope="module")
def variant_app(module_apps):
    return module_apps(TestConfig)


@pytest.fixture(scope="module")
def made_variant(variant_app):
    return made(variant_app.test_client(), MOVED)


def test_a_variant_trains_with_progress_then_serves_as_a_model(variant_app, made_variant):
    client = variant_app.test_client()
    variant, polls = made_variant
    validator(Variant).validate_python(variant)
    assert variant["moved"] == MOVED and variant["knobs"]["learning_rate"] == 0.5
    assert variant["page"] == f"/models/mlp/variants/{variant['id']}"
    progressed = [p["progress"] for p in polls if p["progress"]]
    assert progressed, "no poll showed the training's progress"
    last = progressed[-1]
    assert last["epochs"] == 600 and len(last["curves"][0]["loss"]) == last["epoch"]
    # The recipe draws its decision regions as it learns: pictures at the start, along the way and at the end.
    epochs = [d["epoch"] for d in last["drawings"]]
    assert epochs[0] == 0 and epochs[-1] == 600 and len(epochs) > 10
    regions = next(m for m in last["drawings"][-1]["drawing"]["matrices"] if m["key"] == "regions")
    first = next(m for m in last["drawings"][0]["drawing"]["matrices"] if m["key"] == "regions")
    assert regions["values"] != first["values"]
    data = next(m for m in last["drawings"][-1]["drawing"]["matrices"] if m["key"] == "data")
    assert len(data["values"]) == 64  # the circles, not XOR's four cases

    manifest = client.get(variant["manifest"])
    assert manifest.status_code == 200
    recorded = manifest.get_json()
    assert recorded["slug"] == "mlp" and recorded["files"]["weights.safetensors"]["url"].startswith(variant["page"])
    # It never learnt XOR (it learnt circles): the checks it fails are recorded as failed, not refused.
    assert "The output is above 0.5 exactly where XOR is 1" in recorded["provenance"]["failedChecks"]
    hidden = next(m for c in recorded["experiment"]["cases"] for m in c["matrices"] if m["key"] == "hidden")
    assert len(hidden["values"][0]) == 3  # its own three hidden units
    files = client.get(f"{variant['manifest']}/files").get_json()["files"]
    assert json.loads(client.get(next(f["url"] for f in files if f["name"] == "knobs.json")).data)["hidden"] == 3

    page = client.get(variant["page"])
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Your variant of" in html and 'id="beside-cases"' in html
    assert "3 of its 4 training cases" in html or "of its 4 training cases" in html  # its XOR outcome, and the recorded
    assert "4 of its 4 training cases answered on the right side of 0.5." in html


def test_a_variant_verifies_answers_what_if_and_its_lab_and_retrains_to_the_same_bits(variant_app, made_variant):
    client = variant_app.test_client()
    variant, _ = made_variant
    base = variant["manifest"]
    report = eventually(lambda: client.post(f"{base}/verifications").get_json(), lambda r: "status" in r, seconds=120)
    assert report["status"] == "passed", report["summary"]
    expected = [c for c in report["checks"] if c.get("recorded_failed")]
    assert expected and all(c["status"] == "passed" and c["message"].endswith("fails again") for c in expected)
    whatif = client.post(f"{base}/interventions", json={"case": "xor", "interventions": [
        {"node": "hidden", "action": "zero"}]})
    assert whatif.status_code == 200, whatif.get_json()
    assert whatif.get_json()["model"] == f"mlp/variants/{variant['id']}"
    lab = client.post(f"{base}/runs", json={"x1": 0.5, "x2": 0.5})
    assert lab.status_code == 200 and len(lab.get_json()["case"]["vectors"][1]["values"]) == 3
    started = client.post(f"{base}/retrainings")
    assert started.status_code == 202
    job = eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done",
                     seconds=120, every=0.2)
    assert job["report"]["status"] == "passed" and job["report"]["guarantee"] == "same bits", job["report"]


def test_the_same_knobs_give_the_kept_variant(variant_app, made_variant):
    client = variant_app.test_client()
    again = client.post("/api/models/mlp/variants", json={"knobs": {**MOVED, "learning_rate": 0.5}})
    assert again.status_code == 200 and again.get_json()["id"] == made_variant[0]["id"]
    listed = client.get("/api/models/mlp/variants").get_json()
    assert made_variant[0]["id"] in [v["id"] for v in listed["variants"]]
    assert listed["knobs"]["data"]["choices"] == ["xor", "circles", "spiral"]


@pytest.mark.parametrize(("given", "named"), [
    ({"learning_rate": 5}, "knobs.learning_rate: 5 is out of range 0.01..2"),
    ({"hidden": 2.5}, "knobs.hidden: 2.5 is not a whole number"),
    ({"data": "moons"}, "knobs.data: 'moons' is not one of xor, circles, spiral"),
    ({"momentum": 0.5}, "knobs.momentum: is not a knob of this recipe"),
])
def test_a_knob_refused_is_named(module_client, given, named):
    response = module_client.post("/api/models/mlp/variants", json={"knobs": given})
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(named)


def test_a_body_or_a_model_that_cannot_make_a_variant_is_refused(module_client):
    assert module_client.post("/api/models/mlp/variants", json={"knob": {}}).status_code == 400
    assert module_client.post("/api/models/mlp/variants", json={"knobs": []}).status_code == 400
    no_knobs = module_client.post("/api/models/resnet/variants", json={"knobs": {}})
    assert no_knobs.status_code == 400, no_knobs.get_json()
    assert module_client.post("/api/models/nothing/variants", json={}).status_code == 404
    gone = module_client.get("/models/mlp/variants/0123456789abcdef")
    assert gone.status_code == 404 and b"train it again with its knobs" in gone.data
    assert module_client.get("/api/models/mlp/variants/0123456789abcdef").status_code == 404


def test_24_requests_at_once_are_bounded(variant_app):
    """While a client's variant trains, 24 more of its requests at once each wait their turn as a 429 with Retry-After;
    none is a 5xx, and none starts a second training beside the first."""
    client = variant_app.test_client()
    client.environ_base["REMOTE_ADDR"] = "203.0.113.24"
    first = client.post("/api/models/mlp/variants", json={"knobs": {"steps": 5000, "hidden": 16}})
    assert first.status_code == 202
    answers: list = []
    barrier = threading.Barrier(24)

    def ask(k: int) -> None:
        barrier.wait()
        answers.append(client.post("/api/models/mlp/variants", json={"knobs": {"steps": 110 + 100 * k}}))

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    running = client.get(first.headers["Location"]).get_json()
    assert running["state"] != "done", "the first training ended before the 24 were asked: nothing was bounded"
    assert [a.status_code for a in answers] == [429] * 24
    assert all(a.headers.get("Retry-After") for a in answers)
    assert "one at a time per client" in answers[0].get_json()["error"]["message"]
    eventually(lambda: client.get(first.headers["Location"]).get_json(), lambda j: j["state"] == "done",
               seconds=180, every=0.2)


def test_the_oldest_variant_goes_first_past_the_cap(make_app):
    app = make_app(type("OneKept", (TestConfig,), {"VARIANTS_KEPT": 1}))
    client = app.test_client()
    first, _ = made(client, {"steps": 100})
    second, _ = made(client, {"steps": 200})
    assert client.get(second["page"]).status_code == 200
    gone = client.get(first["manifest"])
    assert gone.status_code == 404 and "went to make room" in gone.get_json()["error"]["message"]


def test_a_server_that_stops_stops_the_trainings_it_started(make_app):
    app = make_app(TestConfig)
    client = app.test_client()
    started = client.post("/api/models/mlp/variants", json={"knobs": {"steps": 5000, "hidden": 16}})
    eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "running")
    parts(app).pool.shutdown()
    job = eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done")
    assert job["report"]["status"] == "cancelled"


def test_a_variant_folder_reads_its_own_knobs(tmp_path: Path):
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "mlp"
    (tmp_path / "recipe.toml").write_bytes((recipe / "recipe.toml").read_bytes())
    assert knobs.stored(tmp_path) is None and knobs.settings(tmp_path)["hidden"] == 2
    (tmp_path / knobs.SETTINGS).write_text(json.dumps({"hidden": 5, "data": "spiral"}))
    assert knobs.settings(tmp_path)["hidden"] == 5
    assert knobs.given(["--knob", "hidden=7"], tmp_path) == {"hidden": "7", "data": "spiral"}
    values = knobs.chosen(knobs.declared(tmp_path), knobs.given([], tmp_path))
    assert knobs.out_folder([], tmp_path, knobs.moved(knobs.declared(tmp_path), values)) is None  # its own folder
    (tmp_path / knobs.SETTINGS).write_text("[1]")
    with pytest.raises(knobs.KnobError, match="knobs.json: is not a JSON object"):
        knobs.stored(tmp_path)


def test_a_check_recorded_as_failed_holds_where_it_fails_again():
    replayed = [{"name": "learns XOR", "passed": False}, {"name": "gradients", "passed": True}]
    held = compare_checks(["learns XOR", "gradients"], replayed, ["learns XOR"])
    assert [c["status"] for c in held] == ["passed", "passed"]
    now_passes = compare_checks(["learns XOR"], [{"name": "learns XOR", "passed": True}], ["learns XOR"])
    assert now_passes[0]["status"] == "failed" and "not what was recorded" in now_passes[0]["message"]


def test_a_training_is_stopped_past_its_cpu_time():
    """A variant's process is capped in CPU time (RLIMIT_CPU): a loop that never ends is stopped by the kernel."""
    code = "from app.compute.process import cap_cpu\ncap_cpu(1)\nwhile True:\n    pass\n"
    ended = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert ended.returncode == -signal.SIGXCPU


def test_a_task_carries_a_variants_own_files_and_never_code(tmp_path):
    """What a compute worker is sent of a variant: its recipe's name and the files that differ from that recipe's
    (laid over the worker's own copy, once for each content); a variant whose code differs, or carried files that
    name code or leave the folder, are refused."""
    from app.compute.errors import RecipeError
    from app.compute.variant_folders import carried, laid_out
    from app.services.config import PROJECT_ROOT

    recipes = PROJECT_ROOT / "recipes"
    variant = tmp_path / "web" / "mlp" / "0123456789abcdef" / "recipe"
    shutil.copytree(recipes / "mlp", variant, ignore=shutil.ignore_patterns("__pycache__", "variants"))
    (variant / "knobs.json").write_text('{"hidden": 3}')
    (variant / "weights.safetensors").write_bytes(b"not the recipe's weights")
    assert carried(recipes / "mlp", recipes) is None  # a catalog folder goes by its name
    sent = carried(variant, recipes)
    assert sent["of"] == "mlp" and sorted(sent["files"]) == ["knobs.json", "weights.safetensors"]
    root = tmp_path / "worker"
    folder = laid_out(sent, recipes, root, kept=2)
    assert (folder / "knobs.json").read_text() == '{"hidden": 3}' and (folder / "model.py").is_file()
    assert laid_out(sent, recipes, root, kept=2) == folder  # once for each content
    for n in range(3):  # past `kept`, the longest unused go
        laid_out(sent | {"files": {"knobs.json": base64.b64encode(b'{"hidden": %d}' % n).decode()}}, recipes, root, 2)
    assert len(list((root / "mlp").iterdir())) == 2 and not folder.exists()
    assert laid_out(sent | {"of": "nothing"}, recipes, root, kept=2) is None
    for name in ("model.py", "../escape.json", "/etc/passwd"):
        with pytest.raises(RecipeError, match="a variant carries data"):
            laid_out(sent | {"files": {name: ""}}, recipes, root, kept=2)
    (variant / "model.py").write_text("print('not the recipe')")
    with pytest.raises(RecipeError, match=r"this variant's code \(model.py\) is not its recipe's mlp"):
        carried(variant, recipes)


def test_a_number_json_holds_or_a_body_nested_deep_is_a_400_naming_what_is_wrong(module_client):
    """Any number a JSON parser accepts (400 digits, 1e400), a body nested 5,000 deep, an empty body and knobs at
    their defaults: each a 400 in words, never a 500."""
    url = "/api/models/mlp/variants"
    for text in ('{"knobs": {"steps": 1%s}}' % ("0" * 400), '{"knobs": {"steps": -1%s}}' % ("0" * 400),
                 '{"knobs": {"learning_rate": 1e400}}', '{"knobs": {"hidden": NaN}}'):
        refused = module_client.post(url, data=text, content_type="application/json")
        assert refused.status_code == 400, refused.get_json()
        message = refused.get_json()["error"]["message"]
        assert message.startswith("knobs.") and len(message) < 200, message
    deep = module_client.post(url, data="[" * 5000 + "]" * 5000, content_type="application/json")
    assert deep.status_code == 400 and deep.get_json()["error"]["message"].startswith("body:")
    for empty in ({}, {"knobs": {}}, {"knobs": {"hidden": 2}}):  # nothing moved: the recorded model
        refused = module_client.post(url, json=empty)
        assert refused.status_code == 400 and "move at least one knob" in refused.get_json()["error"]["message"]
    bare = module_client.post(url)
    assert bare.status_code == 400 and "move at least one knob" in bare.get_json()["error"]["message"]


def test_a_running_variant_answers_under_its_own_kind_alone_and_its_starter_cancels_it(variant_app):
    """While a variant job J runs, /verifications/J and /retrainings/J are 404 (a DELETE there too); its poll
    never shows the cancel token; only the token its POST answered cancels it, and it ends cancelled."""
    client = variant_app.test_client()
    client.environ_base["REMOTE_ADDR"] = "203.0.113.77"
    started = client.post("/api/models/mlp/variants", json={"knobs": {"steps": 5000, "hidden": 12}})
    assert started.status_code == 202
    job = started.get_json()
    token = job["cancel_token"]
    assert len(token) >= 32 and "cancel_token" not in client.get(started.headers["Location"]).get_json()
    for kind in ("verifications", "retrainings"):
        assert client.get(f"/api/models/mlp/{kind}/{job['id']}").status_code == 404
    assert client.delete(f"/api/models/mlp/retrainings/{job['id']}",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 404
    assert client.get(f"/api/models/lenet/variants/jobs/{job['id']}").status_code == 404
    other = variant_app.test_client()
    assert other.delete(started.headers["Location"]).status_code == 403
    assert other.delete(started.headers["Location"], headers={"Authorization": "Bearer wrong"}).status_code == 403
    stopping = client.delete(started.headers["Location"], headers={"Authorization": f"Bearer {token}"})
    assert stopping.status_code == 202, stopping.get_json()
    ended = eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done",
                       seconds=60)
    assert ended["report"]["status"] == "cancelled" and "you cancelled this variant" in ended["report"]["message"]
    again = client.delete(started.headers["Location"], headers={"Authorization": f"Bearer {token}"})
    assert again.status_code == 409


def test_a_cancel_asked_while_a_variant_is_recorded_keeps_nothing(variant_app):
    client = variant_app.test_client()
    client.environ_base["REMOTE_ADDR"] = "203.0.113.78"
    started = client.post("/api/models/mlp/variants", json={"knobs": {"steps": 700, "hidden": 5}})
    token = started.get_json()["cancel_token"]
    eventually(lambda: client.get(started.headers["Location"]).get_json(),
               lambda j: j["stage"] == "recording" or j["state"] == "done", seconds=120, every=0.02)
    assert client.delete(started.headers["Location"], headers={"Authorization": f"Bearer {token}"}).status_code == 202
    ended = eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done",
                       seconds=120)
    assert ended["report"]["status"] == "cancelled" and "nothing was kept" in ended["report"]["message"]
    assert client.get(f"/api/models/mlp/variants/{ended['report']['id']}").status_code == 404


def test_an_idle_clients_burst_starts_one_training(variant_app):
    """Twelve requests at once from a client with nothing running: one starts (its record is written before it is
    admitted, so no other takes its claim for a dead job's), the rest are 429."""
    client = variant_app.test_client()
    client.environ_base["REMOTE_ADDR"] = "203.0.113.12"
    answers: list = []
    barrier = threading.Barrier(12)

    def ask(k: int) -> None:
        barrier.wait()
        answers.append(client.post("/api/models/mlp/variants", json={"knobs": {"steps": 4000 + k, "hidden": 9}}))

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.status_code for a in answers) == [202] + [429] * 11
    started = next(a for a in answers if a.status_code == 202)
    token = started.get_json()["cancel_token"]
    client.delete(started.headers["Location"], headers={"Authorization": f"Bearer {token}"})
    eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done", seconds=60)


def test_a_client_past_its_bound_loses_its_own_least_recently_used_and_every_file_of_it(make_app):
    """VARIANTS_PER_CLIENT 1 and VARIANTS_KEPT 2: a second client's two variants push out its own first, never the
    first client's; past the machine's bound the least recently used goes (the one opened lately stays); a variant
    gone leaves no folder behind, and one whose folder was cut short is unpacked again."""
    app = make_app(type("Fair", (TestConfig,), {"VARIANTS_PER_CLIENT": 1, "VARIANTS_KEPT": 2}))
    reader, other = app.test_client(), app.test_client()
    reader.environ_base["REMOTE_ADDR"] = "198.51.100.1"
    other.environ_base["REMOTE_ADDR"] = "198.51.100.2"
    mine, _ = made(reader, {"steps": 100})
    theirs, _ = made(other, {"steps": 200})
    assert reader.get(theirs["manifest"]).status_code == 200
    root = Path(parts(app).variants_dir)
    unpacked = root / "mlp" / theirs["id"]
    assert unpacked.is_dir()
    shutil.rmtree(unpacked / "manifest")  # cut short, as by a copy a restart stopped,
    parts(app).variants.models.clear()  # and found by a process that has not loaded it
    with app.test_request_context():
        assert model_or_404(f"mlp/variants/{theirs['id']}").slug == f"mlp/variants/{theirs['id']}"
    assert (unpacked / "manifest" / "manifest.json").is_file()
    newer, _ = made(other, {"steps": 300})  # the second client's second: its first goes, the reader's stays
    assert reader.get(mine["manifest"]).status_code == 200
    assert reader.get(theirs["manifest"]).status_code == 404 and not unpacked.exists()
    assert reader.get(newer["page"]).status_code == 200
    parts(app).variants.used.clear()  # this process notes a use once a minute: the next one is noted now
    assert reader.get(mine["manifest"]).status_code == 200  # opened lately: the newest use
    third = app.test_client()
    third.environ_base["REMOTE_ADDR"] = "198.51.100.3"
    made(third, {"steps": 400})  # past VARIANTS_KEPT: the least recently used of all goes
    assert reader.get(mine["manifest"]).status_code == 200
    assert reader.get(newer["manifest"]).status_code == 404 and not (root / "mlp" / newer["id"]).exists()


def test_a_folder_a_dead_process_left_is_removed_when_a_process_starts(make_app, tmp_path):
    folder = tmp_path / "variants"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = folder / f".staging-{dead.stdout.strip()}-abc" / "mlp" / "0123456789abcdef" / "recipe"
    left.mkdir(parents=True)
    mine = folder / f".staging-{os.getpid()}-xyz"
    mine.mkdir()
    make_app(type("Kept", (TestConfig,), {"VARIANTS_DIR": str(folder)}))
    assert not left.parents[2].exists() and mine.is_dir()  # this process's own is left to it


def test_a_clients_trainings_hold_the_places_within_their_share(make_app):
    """Past TRAINING_SHARE_SECONDS of training in the window, a client's next start is a 429 that says when it may
    start; another client starts at once."""
    app = make_app(type("Share", (TestConfig,), {"TRAINING_SHARE_SECONDS": 0.5}))
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "198.51.100.9"
    made(client, {"steps": 1500})
    refused = client.post("/api/models/mlp/variants", json={"knobs": {"steps": 1600}})
    assert refused.status_code == 429, refused.get_json()
    assert "share per client" in refused.get_json()["error"]["message"] and int(refused.headers["Retry-After"]) > 0
    other = app.test_client()
    other.environ_base["REMOTE_ADDR"] = "198.51.100.10"
    assert other.post("/api/models/mlp/variants", json={"knobs": {"steps": 1600}}).status_code == 202
