"""Several app instances sharing one real Redis behave as one; a Redis outage degrades, never breaks."""

import os
import shutil
import socket
import subprocess
import time

import pytest
import redis

from app.services.config import TestConfig
from app.services.parts import parts

from .conftest import Apps, check_bounded_cache, check_sliding_budget, check_units_and_lists

pytestmark = pytest.mark.redis

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A real redis-server on a loopback port, without persistence."""

    def __init__(self) -> None:
        assert shutil.which("redis-server"), "redis-server is needed: scripts/install-test-packages"
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def redis_url():
    """The Redis that CI started (TENSORVIZ_TEST_REDIS_URL), or one started here."""
    given = os.environ.get("TENSORVIZ_TEST_REDIS_URL")
    if given:
        redis.Redis.from_url(given).flushdb()
        yield given
        return
    server = RedisServer()
    server.start()
    yield server.url
    server.stop()


def instance(make_app, url: str, **settings):
    return make_app(type("Shared", (TestConfig,), {"REDIS_URL": url, **settings}))


@pytest.fixture(scope="module")
def two_instances(redis_url):
    apps = Apps()
    yield instance(apps, redis_url), instance(apps, redis_url)
    apps.close()


def test_redis_url_switches_the_store(two_instances):
    from app.services.state import RedisStore

    assert all(isinstance(parts(app).store, RedisStore) for app in two_instances)


def test_a_live_run_computed_by_one_instance_is_served_by_the_other(two_instances):
    first, second = (app.test_client() for app in two_instances)
    computed = first.post("/api/models/bert/runs", json=RUN | {"nsp_label": 1, "mlm_positions": [1, 2]})
    assert computed.get_json()["cached"] is False
    shared = second.post("/api/models/bert/runs", json=RUN | {"nsp_label": 1, "mlm_positions": [1, 2]})
    assert shared.get_json()["cached"] is True
    assert shared.get_json()["case"] == computed.get_json()["case"]
    assert parts(two_instances[1]).pool.pids() == []  # the second never ran a recipe


def test_a_verification_job_is_polled_on_another_instance(two_instances):
    first, second = (app.test_client() for app in two_instances)
    started = first.post("/api/models/bert/verifications")
    assert started.status_code == 202
    location = started.headers["Location"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = second.get(location).get_json()
        assert job["state"] in ("queued", "running", "done")
        if job["state"] == "done":
            break
        time.sleep(0.2)
    assert job["report"]["status"] == "passed"
    again = second.post("/api/models/bert/verifications")
    assert again.status_code == 200 and again.get_json()["cached"] is True
    assert second.get("/api/models/bert/verifications/latest").get_json()["status"] == "passed"


def test_the_compute_budget_is_shared(make_app, redis_url):
    first, second = (instance(make_app, redis_url, COMPUTE_BUDGET="3 per hour").test_client() for _ in range(2))
    statuses = [c.post("/api/models/bert/corruptions", json={"input_ids": [1, 4, 5, 2, 6, 2], "seed": seed},
                       environ_base={"REMOTE_ADDR": "192.0.2.44"}).status_code
                for seed, c in enumerate((first, second, first, second))]
    assert statuses == [200, 200, 200, 429]


def test_while_redis_is_down_pages_and_kept_answers_are_served_and_nothing_starts_without_a_budget(make_app):
    """An outage degrades: pages, manifests and the answers this process holds are served, but a run, a
    verification or a retraining, whose client's budget cannot be counted, is refused with 503 and Retry-After
    rather than started without one; it all comes back with Redis."""
    server = RedisServer()
    server.start()
    app = instance(make_app, server.url)
    client = app.test_client()
    try:
        assert client.post("/api/models/bert/runs", json=RUN).status_code == 200
        assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True
        server.stop()
        for path in ("/", "/models/bert", "/api/models/bert"):
            assert client.get(path).status_code == 200
        for path, body in (("/api/models/bert/runs", RUN | {"mlm_positions": [3]}),
                           ("/api/models/gpt/verifications", None), ("/api/models/mlp/retrainings", None)):
            refused = client.post(path, json=body)
            assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0, path
            assert "compute budget cannot be reached" in refused.get_json()["error"]["message"]
        assert client.post("/api/models/bert/verifications/latest").status_code == 405
        server.start()
        client.post("/api/models/bert/runs", json=RUN)
        assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True
    finally:
        if server.process.poll() is None:
            server.stop()


def test_an_answer_finished_during_an_outage_is_held_served_and_written_back(make_app, monkeypatch):
    """A run admitted before Redis went down finishes during the outage: its answer is held by the process that
    made it, served to that process's next request, and written to Redis when it answers again, for every
    instance."""
    from app.services import runs

    server = RedisServer()
    server.start()
    app = instance(make_app, server.url)
    client = app.test_client()
    started = runs.run

    def outage_meanwhile(call):
        server.stop()
        return started(call)

    try:
        monkeypatch.setattr(runs, "run", outage_meanwhile)
        made = client.post("/api/models/bert/runs", json=RUN)
        assert made.status_code == 200 and made.get_json()["cached"] is False
        monkeypatch.setattr(runs, "run", started)
        held = client.post("/api/models/bert/runs", json=RUN)  # no budget needed: nothing starts
        assert held.status_code == 200 and held.get_json()["cached"] is True
        server.start()
        client.get("/api/models/bert/verifications/latest")  # the store's first answer writes back
        other = instance(make_app, server.url)
        kept = other.test_client().post("/api/models/bert/runs", json=RUN)
        assert kept.status_code == 200 and kept.get_json()["cached"] is True
    finally:
        if server.process.poll() is None:
            server.stop()


def test_the_redis_cache_is_bounded_and_jobs_are_never_evicted(redis_url):
    from app.services.state import RedisStore

    store = RedisStore(redis_url, max_bytes=10_000, max_entry=4_000, prefix="bounded-test:")
    check_bounded_cache(store)
    used = sum(len(store.client.get(k) or b"") for k in store.client.keys("bounded-test:report-*"))
    assert used == store.cached_bytes()  # the byte count is what the values take


def test_redis_charges_units_whole_and_keeps_bounded_lists(redis_url):
    from app.services.state import RedisStore

    check_units_and_lists(RedisStore(redis_url, max_bytes=10_000, max_entry=4_000, prefix="units-test:"))


def test_the_redis_budget_holds_over_any_window_of_its_length(redis_url):
    from app.services.state import RedisStore

    check_sliding_budget(lambda clock: RedisStore(redis_url, max_bytes=10_000, max_entry=4_000, prefix="sliding-test:",
                                                  clock=clock))


def test_flask_cachings_own_redis_backend_shares_answers_between_instances(make_app, redis_url):
    """CACHE_TYPE = "RedisCache": the answers in Flask-Caching's Redis backend, the jobs and budgets in the store."""
    first, second = (instance(make_app, redis_url, CACHE_TYPE="RedisCache", CACHE_REDIS_URL=redis_url)
                     for _ in range(2))
    body = RUN | {"original_ids": [1, 4, 5, 2, 6, 2], "nsp_label": 1, "attention": "causal"}
    assert first.test_client().post("/api/models/bert/runs", json=body).get_json()["cached"] is False
    assert second.test_client().post("/api/models/bert/runs", json=body).get_json()["cached"] is True
    assert any(key.startswith(b"flask_cache_live-reply:") for key in redis.Redis.from_url(redis_url).keys())
