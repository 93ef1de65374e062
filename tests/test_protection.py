"""Protecting the compute: per-client rate limits, a bounded queue, and capped worker memory."""

import threading

import pytest

from app.services.config import TestConfig
from app.services.parts import parts

from .conftest import ModelTree, eventually

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}
SLOW_LAB = "import time\n\ndef live_run(**request):\n    time.sleep(3)\n    return {}\n"
GREEDY_LAB = "import torch\n\ndef live_run(**request):\n    torch.ones(6 * 2**30, dtype=torch.uint8)\n    return {}\n"


def test_one_compute_budget_per_client_across_every_endpoint_that_can_run_a_recipe(make_app):
    app = make_app(type("Budget", (TestConfig,), {"COMPUTE_BUDGET": "4 per hour"}))
    client = app.test_client()
    bad = {"input_ids": [1]}  # refused before anything runs: no budget spent, however many
    for _ in range(6):
        assert client.post("/api/models/bert/runs", json=bad).status_code == 400
    assert client.get("/api/models/bert/trace?input_ids=1").status_code == 400
    assert client.post("/api/models/bert/runs", json=RUN).status_code == 200  # 1
    for _ in range(3):
        assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True  # kept: free
    trace = "/api/models/bert/trace?input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position=2"
    assert client.get(trace).status_code == 200  # 2: a GET that runs counts too
    assert client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 3]}).status_code == 200  # 3
    assert client.post("/api/models/bert/verifications").status_code in (200, 202)  # 4
    for path, body in (("/api/models/gpt/runs", {"input_ids": [1, 5]}), ("/api/models/gpt/runs",
                                                                          {"input_ids": [2, 5]})):
        limited = client.post(path, json=body)
        assert limited.status_code == 429
        assert 0 < int(limited.headers["Retry-After"]) <= 3600
        assert "compute budget of 4 requests per 1 hour exceeded" in limited.get_json()["error"]["message"]
    assert client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 3]}).status_code == 200  # kept
    other = client.post("/api/models/gpt/runs", json={"input_ids": [1, 5]},
                        environ_base={"REMOTE_ADDR": "198.51.100.7"})
    assert other.status_code == 200  # another client's budget
    assert client.get("/api/models").status_code == 200  # reads of stored data are not counted
    assert client.options("/api/models/bert/runs").status_code == 204


@pytest.mark.parametrize("path, body", [
    ("/api/models/bert/runs", RUN),
    ("/api/models/bert/corruptions", {"input_ids": [1, 4, 5, 2, 6, 2], "seed": 1}),
    ("/api/models/bert/verifications", None),
])
def test_a_full_queue_answers_429_with_retry_after_and_starts_nothing(make_app, path, body):
    app = make_app(type("Full", (TestConfig,), {"RECIPE_WORKERS": 1, "RECIPE_QUEUE": 0}))
    pool = parts(app).pool
    pool.admit()  # the one place is taken
    response = app.test_client().post(path, json=body)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "5"
    assert "recipe workers are busy" in response.get_json()["error"]["message"]
    assert pool.pids() == []  # no worker was started for it
    pool.release()


def test_concurrent_runs_beyond_the_queue_are_refused_and_none_is_lost(make_app, tmp_path):
    tree = ModelTree(tmp_path)
    tree.add("bert", lab_py=SLOW_LAB)
    app = make_app(type("Slow", (TestConfig,), tree.config(RECIPE_WORKERS=1, RECIPE_QUEUE=1)))
    statuses: list[int] = []

    def post(n: int) -> None:
        response = app.test_client().post("/api/models/bert/runs", json=RUN | {"nsp_label": n % 2,
                                                                              "mlm_positions": [n]})
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post, args=(n,)) for n in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(statuses) == 5  # every request was answered
    assert sorted(set(statuses)) == [200, 429]
    assert statuses.count(200) == 2  # one running, one queued


def test_a_recipe_that_grabs_memory_fails_cleanly_under_the_cap(make_app, tmp_path):
    tree = ModelTree(tmp_path)
    tree.add("bert", lab_py=GREEDY_LAB)
    app = make_app(type("Capped", (TestConfig,), tree.config(RECIPE_MEMORY_MB=512)))
    client = app.test_client()
    response = client.post("/api/models/bert/runs", json=RUN)
    assert response.status_code == 503  # the server's failure, said in words: never the exception's own text
    message = response.get_json()["error"]["message"]
    assert message == ("the recipe's live_run() in lab.py needed more memory than a recipe process may take "
                       "(RECIPE_MEMORY_MB)")
    # the worker lived on: the same process answers the next request
    pids = parts(app).pool.pids()
    client.post("/api/models/bert/runs", json=RUN | {"nsp_label": 1})
    assert parts(app).pool.pids() == pids


def test_only_the_recipes_own_entry_points_can_run():
    from app.compute import worker
    from app.services.config import PROJECT_ROOT

    task = {"recipe_dir": str(PROJECT_ROOT / "recipes" / "bert"), "args": {}}
    for module, entry in (("run", "main"), ("run", "print_table"), ("lab", "main"), ("model", "build_model"),
                          ("../app/config", "Config"), ("run", "__import__")):
        with pytest.raises(ValueError, match="is not a recipe entry point"):
            worker.execute(task | {"module": module, "entry": entry}, torch=None, seed=0)


def test_request_fields_cannot_name_code_or_files(client):
    for extra in ({"entry": "main"}, {"module": "run"}, {"recipe_dir": "/tmp"}):
        response = client.post("/api/models/bert/runs", json=RUN | extra)
        assert response.status_code == 400
        assert response.get_json()["error"]["message"].startswith(f"{next(iter(extra))}: unknown field")


def test_a_kept_report_starts_nothing_and_spends_no_budget(make_app):
    app = make_app(type("Budget", (TestConfig,), {"COMPUTE_BUDGET": "2 per hour"}))
    client = app.test_client()
    first = client.post("/api/models/bert/verifications")  # a run: one of the two
    assert first.status_code in (200, 202)
    if first.status_code == 202:
        eventually(lambda: client.get(first.headers["Location"]).get_json(), lambda job: job["state"] == "done")
    kept = [client.post("/api/models/bert/verifications") for _ in range(5)]
    assert [r.status_code for r in kept] == [200] * 5 and all(r.get_json()["cached"] for r in kept)
    assert client.post("/api/models/bert/runs", json={"input_ids": [1]}).status_code == 400  # refused: free
    assert client.post("/api/models/bert/runs", json=RUN).status_code == 200  # the second
    assert client.post("/api/models/gpt/runs", json={"input_ids": [1, 5]}).status_code == 429
