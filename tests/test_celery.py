"""The `celery` executor with the real parts: a redis-server and `celery -A compute_worker worker` processes.
Every lab kind and a verification answer as the `local` executor does; two workers share the queue; a worker
child killed mid-task gives its task to another; a time limit is a 504; the broker stopped is a 503 with
Retry-After, and started again, runs go on; the web process never imports torch."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.services.config import PROJECT_ROOT, TestConfig

from .conftest import BERT_RECIPE, CATALOG_SLUGS, ModelTree, eventually
from .test_redis import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.processes]

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}
# The BERT recipe's lab, which waits while a file named `slow` lies beside it, saying which process waits
# (`running-<pid>`): a run that can be caught running.
SLOW_LAB = (BERT_RECIPE / "lab.py").read_text() + '''

_live_run = live_run


def live_run(**args):
    import os
    import pathlib
    import time

    here = pathlib.Path(__file__).parent
    if (here / "slow").exists():
        (here / f"running-{os.getpid()}").touch()
    while (here / "slow").exists():
        time.sleep(0.1)
    return _live_run(**args)
'''


class CeleryWorker:
    """`celery -A compute_worker worker` on the given broker, with `concurrency` children."""

    def __init__(self, broker: str, name: str, concurrency: int = 1, **settings) -> None:
        self.log = Path(f"/tmp/tensorviz-celery-{name}-{os.getpid()}.log")
        env = os.environ | {"TENSORVIZ_REDIS_URL": broker} | {f"TENSORVIZ_{k}": str(v) for k, v in settings.items()}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "compute_worker", "worker", "--concurrency", str(concurrency),
             "-n", f"{name}@%h", "--without-mingle", "--without-gossip", "--loglevel", "info"],
            cwd=PROJECT_ROOT, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while "ready." not in self.log.read_text():
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.2)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture(scope="module")
def broker():
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def worker(broker, gpt2_checkpoint):
    started = CeleryWorker(broker.url, "first", GPT2_CHECKPOINT=gpt2_checkpoint)
    yield started
    started.stop()


def celery_app(make_app, url: str, **settings):
    return make_app(type("Celery", (TestConfig,), {"EXECUTOR": "celery", "REDIS_URL": url, **settings}))


def lab_requests(app) -> list[tuple[str, dict]]:
    """One request of every POST lab endpoint of every model: the one its kind makes from the first recorded
    case (as the recorder checks them), or from its own defaults where there is no case."""
    from app.services.extensions import models

    found = []
    with app.app_context():
        for slug, model in models.catalog.models.items():
            if not model.has_lab:
                continue
            presets = model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab)
            for name, endpoint in model.lab.endpoints.items():
                body = model.lab.kind.example(name, presets, model.lab)
                if endpoint.method == "POST" and body is not None:
                    found.append((f"/api/models/{slug}/{name}", body))
    return found


def test_every_lab_endpoint_and_a_verification_answer_as_the_local_executor(make_app, worker, broker, gpt2_checkpoint):
    # bert-base reads the packaged checkpoint its cases were recorded from; gpt2 a small random one
    local = make_app(type("Local", (TestConfig,), {"GPT2_CHECKPOINT": str(gpt2_checkpoint)}))
    remote = celery_app(make_app, broker.url, GPT2_CHECKPOINT=str(gpt2_checkpoint))
    requests = lab_requests(local)
    with local.app_context():
        from app.services.extensions import models

        with_lab = {slug for slug, model in models.catalog.models.items() if model.has_lab}
    assert {path.split("/")[3] for path, _ in requests} == with_lab
    for slug in sorted(set(CATALOG_SLUGS) - with_lab):  # a model without a lab: its cases, changed
        case = local.test_client().get(f"/api/models/{slug}").get_json()["experiment"]["cases"][0]["id"]
        layer = next(layer["id"] for layer in local.test_client().get(f"/api/models/{slug}").get_json()["layers"]
                     if layer["kind"] in ("layer", "module"))
        requests.append((f"/api/models/{slug}/interventions",
                         {"case": case, "interventions": [{"node": layer, "action": "zero"}]}))
    for path, body in requests:
        here = local.test_client().post(path, json=body)
        there = remote.test_client().post(path, json=body)
        assert (here.status_code, there.status_code) == (200, 200), (path, there.get_json())
        strip = ("compute_seconds", "cached", "environment")
        assert {k: v for k, v in there.get_json().items() if k not in strip} == \
               {k: v for k, v in here.get_json().items() if k not in strip}, path
    client = remote.test_client()
    started = client.post("/api/models/bert/verifications")
    location = started.headers.get("Location")
    report = started.get_json()
    for _ in range(300):
        if location is None or report.get("state") == "done":
            break
        time.sleep(0.2)
        report = client.get(location).get_json()
    report = report.get("report", report)
    assert report["status"] == "passed", report


def test_the_web_process_with_celery_never_imports_torch(worker, broker):
    script = f"""
import sys
from app import create_app
from app.services.config import TestConfig
app = create_app(type("C", (TestConfig,), {{"EXECUTOR": "celery", "REDIS_URL": {broker.url!r}}}))
client = app.test_client()
assert client.post("/api/models/gpt/runs", json={{"input_ids": [1, 5, 7, 3]}}).status_code == 200
assert client.get("/models/gpt").status_code == 200
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024  # this image's, not the forker's
print("torch" in sys.modules, peak)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    imported, peak_mib = done.stdout.split()
    assert imported == "False", done.stderr
    # Importing torch alone takes a process from 10 to 218 MiB here; the web process holds the catalog (which
    # grows with each model, 80 MiB with nine) and no torch.
    assert int(peak_mib) < 150, f"the web process peaked at {peak_mib} MiB"


@pytest.fixture
def own_broker():
    """A Redis of the test's own, so that no other test's workers take its tasks."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def slow_tree(tmp_path) -> ModelTree:
    tree = ModelTree(tmp_path)
    tree.add("slowbert", lab_py=SLOW_LAB)
    return tree


def test_two_workers_share_the_queue_and_a_child_killed_mid_task_hands_it_on(make_app, own_broker, tmp_path):
    broker = own_broker
    tree = slow_tree(tmp_path)
    settings = {"RECIPES_DIR": tree.recipes, "MANIFESTS_DIR": tree.manifests}
    workers = [CeleryWorker(broker.url, name, **settings) for name in ("left", "right")]
    app = celery_app(make_app, broker.url, **{k: str(v) for k, v in settings.items()}, RECIPE_QUEUE=8)
    try:
        slow = tree.recipes / "slowbert" / "slow"
        slow.touch()
        answers: list = []

        def post(body):
            answers.append(app.test_client().post("/api/models/slowbert/runs", json=body))

        bodies = [RUN | {"input_ids": [1, 4, 3, 2, 6, k]} for k in (2, 3)]
        threads = [threading.Thread(target=post, args=(b,)) for b in bodies]
        for t in threads:
            t.start()
        running: list[Path] = []
        for _ in range(300):  # both workers take one task each (prefetch 1, one child each): two processes wait
            running = list(slow.parent.glob("running-*"))
            if len(running) == 2:
                break
            time.sleep(0.1)
        assert len(running) == 2, running
        victim = int(running[0].name.removeprefix("running-"))
        os.kill(victim, signal.SIGKILL)  # mid-task: its task goes back to the queue
        eventually(lambda: Path(f"/proc/{victim}").exists(), lambda alive: not alive)  # its pool has reaped it
        slow.unlink()
        for t in threads:
            t.join(timeout=120)
        assert sorted(a.status_code for a in answers) == [200, 200], [a.get_json() for a in answers]
        assert {tuple(a.get_json()["request"]["input_ids"]) for a in answers} == {tuple(b["input_ids"]) for b in bodies}
    finally:
        for w in workers:
            w.stop()


def test_a_run_past_its_time_limit_is_a_504(make_app, own_broker, tmp_path):
    broker = own_broker
    tree = slow_tree(tmp_path)
    settings = {"RECIPES_DIR": tree.recipes, "MANIFESTS_DIR": tree.manifests, "RECIPE_TIMEOUT": 2}
    w = CeleryWorker(broker.url, "timed", **settings)
    app = celery_app(make_app, broker.url, **{k: str(v) for k, v in settings.items()})
    try:
        (tree.recipes / "slowbert" / "slow").touch()
        answer = app.test_client().post("/api/models/slowbert/runs", json=RUN | {"input_ids": [1, 4, 3, 2, 6, 4]})
        assert answer.status_code == 504, answer.get_json()
        assert "timeout" in answer.get_json()["error"]["message"]
    finally:
        w.stop()


def test_the_broker_stopped_is_a_503_with_retry_after_and_runs_go_on_once_it_is_back(make_app, own_broker):
    server = own_broker
    w = CeleryWorker(server.url, "outage")
    # The shared state apart from the broker: with both in one Redis, the budget that cannot be counted refuses
    # first (tests/test_redis.py); here the broker alone is out of reach.
    app = celery_app(make_app, server.url, REDIS_URL=None, CELERY_BROKER_URL=server.url)
    client = app.test_client()
    try:
        assert client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 3]}).status_code == 200
        server.stop()
        down = client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 4]})
        assert down.status_code == 503 and int(down.headers["Retry-After"]) > 0, down.get_json()
        assert "compute queue cannot be reached" in down.get_json()["error"]["message"]
        server.start()  # the same port: the worker reconnects
        for _ in range(60):
            back = client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 4]})
            if back.status_code == 200:
                break
            time.sleep(0.5)
        assert back.status_code == 200, back.get_json()
        assert json.loads(back.data)["request"]["input_ids"] == [1, 5, 7, 4]
    finally:
        w.stop()


def test_a_compute_worker_without_the_recipe_says_so(make_app, worker, broker, tmp_path):
    tree = slow_tree(tmp_path)  # the web tier serves a model whose recipe the compute machine lacks
    app = celery_app(make_app, broker.url, RECIPES_DIR=str(tree.recipes), MANIFESTS_DIR=str(tree.manifests))
    answer = app.test_client().post("/api/models/slowbert/runs", json=RUN | {"input_ids": [1, 4, 3, 2, 6, 5]})
    assert answer.status_code == 503
    assert "compute worker has no recipe folder slowbert" in answer.get_json()["error"]["message"]


def test_celery_reads_the_visibility_timeout_as_set_and_a_queue_admits_no_more_than_it_holds(own_broker):
    """The broker gives back a task whose worker died after the visibility timeout Celery itself reads (not the
    default hour); runs admitted together by many requests never pass RECIPE_QUEUE (no worker takes them here)."""
    from app.compute.celery_executor import CeleryExecutor
    from app.compute.errors import PoolBusy
    from app.compute.tasks import make_celery, visibility_timeout

    compute = make_celery({"REDIS_URL": own_broker.url, "RECIPES_DIR": str(PROJECT_ROOT / "recipes"),
                           "RECIPE_TIMEOUT": 120, "RECIPE_MEMORY_MB": 0, "RECIPE_TORCH_THREADS": 1, "RECIPE_SEED": 0})
    with compute.connection_for_write() as connection:
        assert connection.transport_options["visibility_timeout"] == visibility_timeout(120) == 185
    executor = CeleryExecutor(own_broker.url, None, 120, 2, 0, PROJECT_ROOT / "recipes")
    admitted, refused = [], []

    def admit():
        try:
            executor.admit()
            admitted.append(1)
        except PoolBusy:
            refused.append(1)

    threads = [threading.Thread(target=admit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(admitted), len(refused)) == (2, 6)
    executor.shutdown()


def test_a_run_no_worker_takes_says_so_and_a_job_poll_in_an_outage_is_a_503(make_app, own_broker, tmp_path):
    """With no compute worker, a run waits for the queue's time and says that no worker took it (503), not that it
    ran too long; with the shared state down, polling a job that exists is a 503 with Retry-After, not a 404."""
    app = celery_app(make_app, own_broker.url, RECIPE_TIMEOUT=1, RECIPE_QUEUE=1)
    client = app.test_client()
    try:
        waited = client.post("/api/models/gpt/runs", json={"input_ids": [1, 5, 7, 3]})
        assert waited.status_code == 503 and int(waited.headers["Retry-After"]) > 0, waited.get_json()
        assert "no compute worker took it" in waited.get_json()["error"]["message"]
        from app.services.extensions import state

        with app.app_context():
            state.store.set("verification-job:kept", {"id": "kept", "model": "gpt", "state": "running"}, 60)
        own_broker.stop()
        polled = client.get("/api/models/gpt/verifications/kept")
        assert polled.status_code == 503 and int(polled.headers["Retry-After"]) > 0, polled.get_json()
        assert "cannot be reached" in polled.get_json()["error"]["message"]
        started = client.post("/api/models/gpt/verifications")
        assert started.status_code == 503 and "Retry-After" in started.headers, started.get_json()
    finally:
        own_broker.start()


def test_a_retraining_on_a_compute_worker_is_heard_as_it_learns_and_can_be_cancelled(make_app, worker, broker):
    """The compute tier retrains as the local executor does: progress read from the task's state, the report
    compared tensor by tensor; a cancel reaches the worker through the broker and stops its training; a training
    past its time limit is stopped by the worker."""
    from .test_retraining import poll

    app = celery_app(make_app, broker.url)
    client = app.test_client()
    started = client.post("/api/models/gcn/retrainings")
    assert started.status_code == 202
    seen = poll(client, started.headers["Location"])
    heard = [job["progress"] for job in seen if job["progress"] is not None]
    assert heard and heard[-1]["epoch"] == heard[-1]["epochs"] == 200
    report = seen[-1]["report"]
    assert report["status"] == "passed" and report["environment"]["mode"] == "train"
    assert len(report["curves"][0]["loss"]) == 200 and report["tensors"]

    lenet = client.post("/api/models/lenet/retrainings")
    location = lenet.headers["Location"]
    running = poll(client, location, until=lambda job: job["progress"] is not None)[-1]
    assert running["state"] == "running" and running["progress"]["epochs"] == 50
    token = {"Authorization": f"Bearer {lenet.get_json()['cancel_token']}"}
    assert client.delete(location, headers=token).status_code == 202
    report = poll(client, location, seconds=60)[-1]["report"]
    assert report["status"] == "cancelled" and 0 < len(report["curves"][0]["loss"]) < 50
    limited = celery_app(make_app, broker.url, RETRAINING_TIMEOUT=1.5)  # the worker's own limit stops it
    client = limited.test_client()
    report = poll(client, client.post("/api/models/mlp/retrainings").headers["Location"], seconds=60)[-1]["report"]
    assert report["status"] == "error"
    assert report["message"] == "the retraining ran past its 1.5 s limit and was stopped"


def test_a_retraining_on_a_compute_worker_is_joined_paid_for_and_fails_by_the_changed_tensors_name(make_app, own_broker,
                                                                                                   tmp_path):
    """On the compute worker's own copy of the recipe, whose weight file has one tensor changed: a second request
    joins the job, another model's start while it runs is refused (one at a time per client: a 429), and the report
    fails naming that tensor alone."""
    from recipekit import weights

    from .test_retraining import poll

    tree = ModelTree(tmp_path)
    _, folder = tree.copy("gcn")
    tree.copy("mlp")
    stored, metadata = weights.read(folder / "weights.safetensors")
    changed = stored | {"conv1.linear.weight": stored["conv1.linear.weight"] - 0.25}
    weights.write(folder / "weights.safetensors", changed, metadata)
    settings = {"RECIPES_DIR": tree.recipes, "MANIFESTS_DIR": tree.manifests}
    w = CeleryWorker(own_broker.url, "retrainer", **settings)
    app = celery_app(make_app, own_broker.url, **{k: str(v) for k, v in settings.items()},
                     COMPUTE_BUDGET="30 per minute")
    try:
        client = app.test_client()
        started = client.post("/api/models/gcn/retrainings")
        assert started.status_code == 202
        assert client.post("/api/models/gcn/retrainings").get_json()["id"] == started.get_json()["id"]
        assert client.post("/api/models/mlp/retrainings").status_code == 429
        report = poll(client, started.headers["Location"])[-1]["report"]
        assert report["status"] == "failed"
        assert [t["name"] for t in report["tensors"] if t["largest_difference"] > report["tolerance"]] == \
            ["conv1.linear.weight"]
    finally:
        w.stop()



def test_a_variant_trains_on_a_compute_worker_and_another_machine_serves_verifies_and_changes_it(make_app, worker,
                                                                                               broker):
    """A learner's variant under Celery: trained on a compute worker with its progress polled, recorded through the
    queue, then served by a second web machine that shares only the Redis (its page, a verification that passes, a
    What if?, its lab and a retraining to the same bits), each run of it on a worker that laid the variant's files
    over its own recipe folder."""
    from .test_variants import MOVED, made

    first, second = celery_app(make_app, broker.url), celery_app(make_app, broker.url)
    variant, polls = made(first.test_client(), MOVED)
    assert any(p["progress"] for p in polls) and any(p.get("stage") == "recording" for p in polls)
    client = second.test_client()
    assert client.get(variant["page"]).status_code == 200
    recorded = client.get(variant["manifest"]).get_json()
    hidden = next(m for c in recorded["experiment"]["cases"] for m in c["matrices"] if m["key"] == "hidden")
    assert len(hidden["values"][0]) == 3  # its own three hidden units: the variant's weights ran, not the recipe's
    report = eventually(lambda: client.post(f"{variant['manifest']}/verifications").get_json(),
                        lambda r: "status" in r, seconds=120)
    assert report["status"] == "passed", report["summary"]
    whatif = client.post(f"{variant['manifest']}/interventions", json={"case": "xor", "interventions": [
        {"node": "hidden", "action": "zero"}]})
    assert whatif.status_code == 200, whatif.get_json()
    lab = client.post(f"{variant['manifest']}/runs", json={"x1": 0.5, "x2": 0.5})
    assert lab.status_code == 200 and len(lab.get_json()["case"]["vectors"][1]["values"]) == 3
    started = client.post(f"{variant['manifest']}/retrainings")
    assert started.status_code == 202
    job = eventually(lambda: client.get(started.headers["Location"]).get_json(), lambda j: j["state"] == "done",
                     seconds=120, every=0.2)
    assert job["report"]["status"] == "passed" and job["report"]["guarantee"] == "same bits", job["report"]
