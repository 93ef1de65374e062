"""Retraining on the server: a recipe's train.py run again in a process of its own, heard epoch by epoch, joined,
cancelled, stopped at its time limit, paid for from the client's budget, and its weights compared tensor by tensor
with the stored ones (a changed weight file fails by the tensor's name)."""

import itertools
import time
from pathlib import Path

import pytest
import torch

from app.domain.shapes import RetrainingReport, validator
from app.services.config import PROJECT_ROOT
from recipekit import training, weights
from recipekit.kernels import machine

from .conftest import eventually

GCN = "gcn"  # 200 epochs in about a second, beside two of a process's start: the quickest recipe to retrain
MLP = "mlp"  # 2,000 epochs in a second or two
LENET = "lenet"  # 50 epochs over several seconds: one to catch while it trains


def poll(client, location: str, until=lambda job: job["state"] == "done", seconds: float = 180) -> list[dict]:
    """Every answer to polls of a job (every 0.1 s) until `until` holds of one, which is last."""
    seen = []

    def ask() -> dict:
        answer = client.get(location)
        assert answer.status_code == 200, answer.get_json()
        seen.append(answer.get_json())
        return seen[-1]

    eventually(ask, until, seconds, every=0.1)
    return seen


def trainers() -> list[str]:
    """The command lines of the training processes running now."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "app.compute.retraining" in line:
            found.append(line)
    return found


# ---- the comparison train.py reports


ELSEWHERE = training.Elsewhere(1.0, "a test's bound", {"test_accuracy": training.Bound(0.1, "a test's bound")})


def test_a_retraining_says_which_guarantee_held(tmp_path, monkeypatch):
    """The same bits; within the tolerance; elsewhere, weights within their bound and the behaviour within its own; on
    the machine that trained them, only the first two."""
    stored = {"w": torch.zeros(3)}
    path = tmp_path / "weights.safetensors"

    def retrained(moved: float, accuracy: float, trained_on: str | None = None) -> dict:
        metadata = training.metadata(test_accuracy=0.9)  # says that this machine trained it
        del metadata["trained_on"]
        if trained_on is not None:
            metadata["trained_on"] = trained_on
        weights.write(path, stored, metadata)
        made = training.Trained({path: ({"w": stored["w"] + moved}, training.metadata(test_accuracy=accuracy))}, "")
        return training.compared(made, 1e-3, ELSEWHERE)

    assert retrained(0.0, 0.9)["guarantee"] == "same bits"
    within = retrained(5e-4, 0.9)
    assert within["guarantee"] == "tolerance" and within["passed"] and within["bound"] == 1e-3
    elsewhere = retrained(0.5, 0.85)  # the stored file does not say which machine trained it
    assert elsewhere["guarantee"] == "behaviour" and elsewhere["passed"] and elsewhere["trained_here"] is None
    assert elsewhere["bound"] == 1.0 and elsewhere["behaviour"][0] | {} == {
        "name": "test_accuracy", "stored": 0.9, "retrained": 0.85, "difference": pytest.approx(0.05), "allowed": 0.1,
        "why": "a test's bound", "held": True}
    assert "Not the same bits (the stored weights do not say which machine trained them)" in elsewhere["verdict"]
    assert "test accuracy 0.85 against 0.9 stored (allowed ±0.1)" in elsewhere["verdict"]
    other = retrained(0.5, 0.85, trained_on='{"cpu": "another", "vector_extensions": []}')
    assert other["guarantee"] == "behaviour" and other["trained_here"] is False
    assert "another machine" in other["verdict"]
    worse = retrained(0.5, 0.7)  # what the model does moved past its bound
    assert worse["guarantee"] == "none" and not worse["passed"] and "NOT HELD" in worse["verdict"]
    farther = retrained(2.0, 0.9)  # past the weights' bound
    assert farther["guarantee"] == "none" and "beyond even the 1" in farther["verdict"]
    here = retrained(0.5, 0.9, trained_on=machine())  # on the machine (and torch) that trained them
    assert here["trained_here"] is True and here["guarantee"] == "none" and not here["passed"]
    assert here["verdict"].startswith("On the machine and torch that trained them a retraining gives the same bits")


def test_the_comparison_names_every_tensor_and_the_one_that_differs(tmp_path):
    stored = {"a.weight": torch.arange(6.0).reshape(2, 3), "a.bias": torch.zeros(2), "b": torch.ones(1)}
    path = tmp_path / "weights.safetensors"
    weights.write(path, stored, training.metadata(test_accuracy=0.75, loss_per_epoch=[1.0, 0.5]))
    same = training.Trained({path: (dict(stored), training.metadata(test_accuracy=0.75, loss_per_epoch=[1.0, 0.5]))},
                            "test accuracy 0.75", {"same split": True})
    report = training.compared(same, 1e-3, ELSEWHERE)
    assert report["passed"] and report["identical"] == 3 and report["largest_difference"] == 0.0
    assert report["guarantee"] == "same bits" and report["verdict"].startswith("The same bits: all 3 tensors")
    assert [t["name"] for t in report["tensors"]] == ["a.bias", "a.weight", "b"]
    figure = {f["name"]: f for f in report["figures"]}
    assert figure["test_accuracy"] | {} == {"file": "weights.safetensors", "name": "test_accuracy", "same": True,
                                            "values": 1, "largest_difference": 0.0, "stored": 0.75, "retrained": 0.75}
    assert figure["loss_per_epoch"]["values"] == 2 and "torch" not in figure

    moved = dict(stored) | {"a.weight": stored["a.weight"] + torch.tensor([[0, 0, 0.5], [0, 0, 0]])}
    del moved["b"]
    changed = training.Trained({path: (moved, training.metadata(test_accuracy=0.5, loss_per_epoch=[1.0, 0.5]))},
                               "test accuracy 0.5", {"same split": False})
    report = training.compared(changed, 1e-3, ELSEWHERE)
    tensors = {t["name"]: t for t in report["tensors"]}
    assert not report["passed"] and report["largest_difference"] is None  # a tensor missing: no one number says it
    assert tensors["a.weight"]["largest_difference"] == 0.5 and not tensors["a.weight"]["identical"]
    assert tensors["b"]["problem"] == "the retraining made no such tensor"
    assert tensors["a.bias"]["identical"] and tensors["a.bias"]["problem"] is None
    assert {f["name"]: (f["stored"], f["retrained"], f["same"]) for f in report["figures"]}["test_accuracy"] == \
        (0.75, 0.5, False)
    assert report["facts"] == [{"name": "same split", "held": False}]


# ---- the job, through the local executor


def test_a_retraining_is_heard_as_it_learns_joined_and_then_kept(tree, tree_app):
    tree.copy(GCN)
    client = tree_app().test_client()
    started = client.post(f"/api/models/{GCN}/retrainings")
    assert started.status_code == 202 and started.headers["Retry-After"] == "1"
    job = started.get_json()
    assert job["location"] == started.headers["Location"] == f"/api/models/{GCN}/retrainings/{job['id']}"
    joined = client.post(f"/api/models/{GCN}/retrainings")  # the same recipe files: the same job
    assert joined.status_code == 202 and joined.get_json()["id"] == job["id"]
    seen = poll(client, job["location"])
    heard = [j["progress"] for j in seen if j["progress"] is not None]
    assert heard, "no progress was heard"
    epochs = [p["epoch"] for p in heard]
    assert epochs == sorted(epochs) and heard[-1]["epoch"] == heard[-1]["epochs"] == 200
    curve = heard[-1]["curves"][0]
    assert (curve["run"], curve["epochs"], curve["unit"], len(curve["loss"])) == (1, 200, "epoch", 200)
    assert curve["loss"][-1] < curve["loss"][0] / 10  # it learnt

    report = seen[-1]["report"]
    assert report["status"] == "passed" and report["cached"] is False
    stored, metadata = weights.read(PROJECT_ROOT / "recipes" / GCN / "weights.safetensors")
    assert {t["name"] for t in report["tensors"]} == set(stored)
    assert all(t["largest_difference"] <= report["tolerance"] for t in report["tensors"])
    figures = {f["name"]: f for f in report["figures"]}
    assert figures["accuracy"]["stored"] == figures["accuracy"]["retrained"] == float(metadata["accuracy"])
    assert report["curves"][0]["loss"] == curve["loss"]
    env = report["environment"]
    assert env["mode"] == "train" and env["cpu_capability"] == "AVX2" and env["torch_threads"] == 1
    assert "avx2" in env["vector_extensions"] and env["cpu"] and env["deterministic"] is True
    assert set(report["files"]) == {"train.py", "weights.safetensors"}

    kept = client.post(f"/api/models/{GCN}/retrainings")  # the same files again: the kept report, at once
    assert kept.status_code == 200
    assert kept.get_json() | {"cached": False} == report and kept.get_json()["cached"] is True


def test_a_changed_weight_file_fails_by_the_tensors_name(tree, tree_app):
    _, folder = tree.copy(GCN)
    stored, metadata = weights.read(folder / "weights.safetensors")
    weights.write(folder / "weights.safetensors", stored | {"conv2.linear.weight": stored["conv2.linear.weight"] + 0.5},
                  metadata)
    client = tree_app().test_client()
    report = poll(client, client.post(f"/api/models/{GCN}/retrainings").headers["Location"])[-1]["report"]
    assert report["status"] == "failed"
    off = [t["name"] for t in report["tensors"] if t["largest_difference"] > report["tolerance"]]
    assert off == ["conv2.linear.weight"]
    assert report["largest_difference"] == pytest.approx(0.5, abs=1e-5)


def bearer(started) -> dict:
    """The header that cancels a retraining: its start's cancel token."""
    return {"Authorization": f"Bearer {started.get_json()['cancel_token']}"}


def test_a_retraining_can_be_cancelled_and_is_then_not_kept(tree, tree_app):
    tree.copy(LENET)
    client = tree_app().test_client()
    started = client.post(f"/api/models/{LENET}/retrainings")
    location = started.headers["Location"]
    running = poll(client, location, until=lambda job: job["progress"] is not None)[-1]
    assert running["state"] == "running" and running["progress"]["curves"][0]["metrics"]["test_accuracy"]
    assert "cancel_token" not in running  # given once, to its starter, never to a poller
    cancelled = client.delete(location, headers=bearer(started))
    assert cancelled.status_code == 202 and cancelled.headers["Location"] == location
    report = poll(client, location, seconds=30)[-1]["report"]
    assert report["status"] == "cancelled" and report["message"] == "the retraining was cancelled"
    assert 0 < len(report["curves"][0]["loss"]) < 50  # as far as it got
    again = client.delete(location, headers=bearer(started))
    assert again.status_code == 409 and "ended already (cancelled)" in again.get_json()["error"]["message"]
    assert not [line for line in trainers() if str(tree.recipes) in line]
    fresh = client.post(f"/api/models/{LENET}/retrainings")  # a cancelled retraining is no answer to keep
    assert fresh.status_code == 202 and fresh.get_json()["id"] != running["id"]
    client.delete(fresh.headers["Location"], headers=bearer(fresh))
    poll(client, fresh.headers["Location"], seconds=30)


def from_address(app, address: str):
    """A test client of another reader: requests from `address`."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def test_only_the_client_that_started_a_retraining_can_cancel_it(tree, tree_app):
    """A reader who joins a retraining learns its id but not its cancel token: without the starter's token a DELETE
    is a 403 and the training goes on; with it, it stops."""
    tree.copy(LENET)
    app = tree_app()
    starter, stranger = app.test_client(), from_address(app, "192.0.2.7")
    started = starter.post(f"/api/models/{LENET}/retrainings")
    joined = stranger.post(f"/api/models/{LENET}/retrainings")
    assert joined.status_code == 202 and joined.get_json()["id"] == started.get_json()["id"]
    assert "cancel_token" not in joined.get_json() and len(started.get_json()["cancel_token"]) >= 32
    location = started.headers["Location"]
    for headers in ({}, {"Authorization": "Bearer " + "A" * 32}, {"Authorization": "Basic c3RyYW5nZXI="}):
        refused = stranger.delete(location, headers=headers)
        assert refused.status_code == 403, headers
        assert refused.get_json()["error"]["message"].startswith("only the client that started this retraining")
    assert stranger.get(location).get_json()["state"] != "done"
    assert starter.delete(location, headers=bearer(started)).status_code == 202
    assert poll(starter, location, seconds=30)[-1]["report"]["status"] == "cancelled"


def test_retrainings_take_turns_on_the_machine_whichever_process_takes_them(tree, tree_app):
    """Three readers start three retrainings through three web processes of one machine (three apps, one shared
    state): one trains at a time, the others wait queued, and each ends with its report."""
    for slug in (GCN, MLP, LENET):
        tree.copy(slug)
    state = str(tree.manifests.parent / "state.sqlite3")
    apps = [tree_app(STATE_PATH=state) for _ in range(3)]
    readers = [from_address(app, f"192.0.2.{n}") for n, app in enumerate(apps, start=1)]
    started = [reader.post(f"/api/models/{slug}/retrainings")
               for reader, slug in zip(readers, (LENET, GCN, MLP), strict=True)]
    assert [answer.status_code for answer in started] == [202] * 3
    locations = [answer.headers["Location"] for answer in started]
    most, states = 0, set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        jobs = [reader.get(location).get_json() for reader, location in zip(readers, locations, strict=True)]
        states |= {job["state"] for job in jobs}
        # The training processes alive at once. (Three polls, one after another, are no snapshot of the jobs' states:
        # one may read a job still running and the next the job that took its place a moment later. The jobs' own
        # start and end times are checked below.)
        most = max(most, len([line for line in trainers() if str(tree.recipes) in line]))
        if all(job["state"] == "done" for job in jobs):
            break
        time.sleep(0.05)
    assert most == 1 and "queued" in states
    assert [job["report"]["status"] for job in jobs] == ["passed"] * 3
    # Starts are in the order the places freed: no two trained at once.
    spans = sorted((job["started_at"], job["finished_at"]) for job in jobs)
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(spans))



def test_two_jobs_that_find_a_place_left_by_an_ended_job_never_both_take_it(app, monkeypatch):
    """A place still held by a job that has ended is taken over; two waiters that looked at once both found the ended
    job there, but the second to act finds it taken and waits on (it took it from the first, and they trained
    together, before a takeover named the holder it replaced)."""
    from app.services import places
    from app.services.extensions import state

    with app.app_context():
        place = places.places()[0]
        state.store.set("retraining-job:ended", {"state": "done"}, 60)
        state.store.set("retraining-job:first", {"state": "queued", "heartbeat": time.time()}, 60)
        state.store.set("retraining-job:second", {"state": "queued", "heartbeat": time.time()}, 60)
        assert places.claim(place, "retraining-job:ended", 60)
        assert places.claim(place, "retraining-job:first", 60)  # taken over from the ended job
        read = state.store.get
        monkeypatch.setattr(state.store, "get", lambda key, strict=False: "retraining-job:ended" if key == place
                            else read(key, strict))  # the second read the place before the first took it
        assert not places.claim(place, "retraining-job:second", 60)
        monkeypatch.undo()
        assert state.store.get(place) == "retraining-job:first"


def test_a_queued_retraining_cancelled_before_its_turn_never_trains(tree, tree_app):
    tree.copy(LENET)
    tree.copy(GCN)
    app = tree_app()
    first, second = app.test_client(), from_address(app, "192.0.2.9")
    training = first.post(f"/api/models/{LENET}/retrainings")
    poll(first, training.headers["Location"], until=lambda job: job["state"] == "running")
    again = first.post(f"/api/models/{GCN}/retrainings")  # the same reader, another model: one start at a time
    assert again.status_code == 429 and "one at a time per client" in again.get_json()["error"]["message"]
    queued = second.post(f"/api/models/{GCN}/retrainings")
    assert second.get(queued.headers["Location"]).get_json()["state"] == "queued"
    assert second.delete(queued.headers["Location"], headers=bearer(queued)).status_code == 202
    report = poll(second, queued.headers["Location"], seconds=30)[-1]["report"]
    assert report["status"] == "cancelled" and report["message"] == "cancelled while it waited for a place to train"
    assert report["curves"] == [] and "environment" not in report
    validator(RetrainingReport).validate_python(report, strict=True)
    assert first.get(training.headers["Location"]).get_json()["state"] == "running"
    first.delete(training.headers["Location"], headers=bearer(training))
    poll(first, training.headers["Location"], seconds=30)


def test_a_retraining_past_its_time_limit_is_stopped(tree, tree_app):
    tree.copy(GCN)
    client = tree_app(RETRAINING_TIMEOUT=1.5).test_client()
    report = poll(client, client.post(f"/api/models/{GCN}/retrainings").headers["Location"], seconds=60)[-1]["report"]
    assert report["status"] == "error"
    assert report["message"] == "the retraining ran past its 1.5 s limit and was stopped"
    assert not [line for line in trainers() if str(tree.recipes) in line]
    assert client.post(f"/api/models/{GCN}/retrainings").status_code == 202  # an error is not kept


def test_a_retraining_spends_its_declared_cost_of_the_budget_however_it_ends(tree, tree_app):
    """Each start spends RETRAINING_COST, a cancelled one too: starting and cancelling cannot keep the CPU busy."""
    tree.copy(GCN)
    tree.copy(MLP)
    client = tree_app(COMPUTE_BUDGET="30 per minute", RETRAINING_COST=20).test_client()
    started = client.post(f"/api/models/{MLP}/retrainings")
    assert started.status_code == 202
    assert client.post(f"/api/models/{MLP}/retrainings").status_code == 202  # joining it spends nothing
    client.delete(started.headers["Location"], headers=bearer(started))
    assert poll(client, started.headers["Location"], seconds=30)[-1]["report"]["status"] == "cancelled"
    refused = client.post(f"/api/models/{GCN}/retrainings")  # 20 of 30 spent: another 20 would pass the budget
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert "(this costs 20)" in refused.get_json()["error"]["message"]
    # The refusal spent nothing: what is left serves runs of one.
    assert client.post(f"/api/models/{GCN}/verifications").status_code in (200, 202)

    never = tree_app(COMPUTE_BUDGET="10 per minute", RETRAINING_COST=20).test_client()
    answer = never.post(f"/api/models/{GCN}/retrainings")
    assert answer.status_code == 429 and "can never start on this server" in answer.get_json()["error"]["message"]


def test_only_a_model_its_recipe_trains_can_be_retrained(client):
    refused = client.post("/api/models/bert/retrainings")
    assert refused.status_code == 404 and "no train.py" in refused.get_json()["error"]["message"]
    assert client.get(f"/api/models/bert/retrainings/{'0' * 32}").status_code == 404
    assert client.get(f"/api/models/{GCN}/retrainings/{'0' * 32}").status_code == 404
    assert client.delete(f"/api/models/{GCN}/retrainings/{'0' * 32}").status_code == 404
    links = {m["slug"]: m["links"] for m in client.get("/api/models").get_json()["models"]}
    assert "retrainings" not in links["bert"] and links[GCN]["retrainings"] == f"/api/models/{GCN}/retrainings"
    assert {slug for slug, link in links.items() if "retrainings" in link} == \
        {folder.parent.name for folder in (PROJECT_ROOT / "recipes").glob("*/train.py")}
    crossed = client.post(f"/api/models/{GCN}/retrainings", headers={"Sec-Fetch-Site": "cross-site"})
    assert crossed.status_code == 403


def test_a_retraining_that_needs_a_missing_package_is_refused_before_it_starts(tree, tree_app):
    """The model is served (only its training needs the package); a retraining answers 503 naming the package and
    the command that installs it, spends nothing and starts no job."""
    _, folder = tree.copy(GCN)
    listed = folder / "requirements.txt"
    listed.write_text(listed.read_text() + 'tensorviz-missing-trainer>=2 ; extra == "training"\n')
    client = tree_app(COMPUTE_BUDGET="1 per minute").test_client()
    assert client.get(f"/api/models/{GCN}").status_code == 200
    refused = client.post(f"/api/models/{GCN}/retrainings")
    assert refused.status_code == 503
    assert refused.get_json()["error"]["message"] == (
        f"retraining {GCN} needs what this server lacks: requirements.txt needs tensorviz-missing-trainer>=2, which is "
        "not installed here (pip install 'tensorviz-missing-trainer>=2', or make setup)")
    assert client.post(f"/api/models/{GCN}/verifications").status_code in (200, 202)  # the budget was not spent


def test_a_training_that_stops_without_a_report_says_its_last_words(tree, tree_app):
    """train.py ending with an error: the report says so with the last line it wrote, never a server failure."""
    _, folder = tree.copy(GCN)
    (folder / "train.py").write_text('import sys\n\n\ndef main(argv):\n    sys.exit("the data went missing")\n')
    client = tree_app().test_client()
    report = poll(client, client.post(f"/api/models/{GCN}/retrainings").headers["Location"])[-1]["report"]
    assert report["status"] == "error"
    assert report["message"] == "train.py stopped (exit status 1) without a report: the data went missing"
    validator(RetrainingReport).validate_python(report, strict=True)  # the schema the page reads: curves included
