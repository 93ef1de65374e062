"""Several gunicorn workers without Redis behave as one server: one shared state for jobs, reports and the
compute budget; a job whose web worker dies ends as an error; its recipe worker does not outlive it."""

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.services.config import PROJECT_ROOT

from .conftest import BERT_MANIFEST, BERT_RECIPE, ModelTree, eventually

pytestmark = pytest.mark.processes


def replay_after(wait: str) -> str:
    """The BERT recipe's run.py, with a replay that first runs `wait` (lines of Python, `os` and `time` imported)."""
    body = "\n".join(f"    {line}" for line in wait.splitlines())
    return (BERT_RECIPE / "run.py").read_text() + f'''

_replay = replay


def replay(model=None):
    import os
    import time
{body}
    return _replay(model)
'''


def slow_replay(seconds: float) -> str:
    """A replay that first sleeps (so that runs overlap requests)."""
    return replay_after(f"time.sleep({seconds})")


def held_replay(flag: Path, seconds: float) -> str:
    """A replay that first waits while `flag` exists, `seconds` at most."""
    return replay_after(f"waited = time.monotonic()\n"
                        f"while os.path.exists({str(flag)!r}) and time.monotonic() - waited < {seconds}:\n"
                        f"    time.sleep(0.1)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict, dict]:
    """One request on a fresh connection (so that the kernel may hand it to any worker)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", "Connection": "close"})
        response = conn.getresponse()
        raw = response.read()
        return response.status, dict(response.getheaders()), json.loads(raw) if raw else {}
    finally:
        conn.close()


def server_env(tree: ModelTree, workers: int) -> dict:
    """The environment a server of this model tree runs in: no Redis, its own folders and state file."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "TENSORVIZ_REDIS_URL")}
    return env | {"WEB_CONCURRENCY": str(workers), "TENSORVIZ_MANIFESTS_DIR": str(tree.manifests),
                  "TENSORVIZ_RECIPES_DIR": str(tree.recipes),
                  "TENSORVIZ_STATE_PATH": str(tree.manifests.parent / "state.sqlite3")}


def wait_until_answering(server, name: str) -> None:
    """Return once the server answers its catalog; else stop it and raise with the end of its log."""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                if call(server.port, "GET", "/api/models")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
    except BaseException:  # an answer that is not the catalog's: nothing may outlive the test
        server.stop()
        raise
    server.stop()
    raise RuntimeError(f"{name} did not start: " + Path(server.log.name).read_text()[-2000:])


class Gunicorn:
    """`gunicorn -c gunicorn.conf.py wsgi:app` on a model tree, without Redis."""

    def __init__(self, tree: ModelTree, workers: int, **settings) -> None:
        self.port = free_port()
        env = server_env(tree, workers) | {"TENSORVIZ_VERIFY_WAIT": "0"}
        env |= {f"TENSORVIZ_{k}": json.dumps(v) for k, v in settings.items()}
        self.log = open(tree.manifests.parent / "gunicorn.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{self.port}",
             "--access-logfile", "/dev/null", "wsgi:app"], cwd=PROJECT_ROOT, env=env, stdout=self.log,
            stderr=self.log, start_new_session=True)  # its own group: stop() ends whatever it left behind
        wait_until_answering(self, "gunicorn")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGQUIT)  # quick shutdown: a test does not wait for runs to finish
        try:
            # A worker that does not quit at once (one still in post_fork has not yet taken gunicorn's handlers)
            # keeps the arbiter waiting its graceful timeout, the recipe timeout and more: seen as a 65 s test.
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        # A worker quit a second after it booted can outlive its master (seen: one in several runs, with its
        # recipe processes): nothing of the server may stay behind the test.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def server_record(tree: ModelTree, key: str) -> dict:
    """What the server keeps under `key` in its shared SQLite store (a job's owner, which no client sees)."""
    with sqlite3.connect(tree.manifests.parent / "state.sqlite3") as db:
        return json.loads(db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()[0])


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def descendants(pid: int) -> list[int]:
    found = children(pid)
    return found + [d for child in found for d in descendants(child)]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def tree(tmp_path: Path) -> ModelTree:
    return ModelTree(tmp_path)


def status_of(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_no_one_file_or_setting_stops_the_server_nor_a_worker_s_restart(tree):
    """A manifest holding NaN and a checkpoint setting that cannot be checked: every worker boots (each renders
    every model page first), the manifest is listed unavailable with its reason, the rest is served, and a
    worker killed is replaced by one that boots too."""
    tree.add("bert")
    raw = json.dumps(json.loads(BERT_MANIFEST.read_text()) | {"slug": "odd"})
    tree.add("odd", manifest=re.sub(r'("value": )-?[0-9.e-]+', r"\1NaN", raw, count=1).encode())
    for folder in (tree.manifests, tree.recipes):
        shutil.copytree(PROJECT_ROOT / folder.name / "bert-base", folder / "bert-base",
                        ignore=shutil.ignore_patterns("__pycache__"))
    server = Gunicorn(tree, workers=2, BERT_CHECKPOINT=str(tree.manifests.parent / ("x" * 300)))
    try:
        catalog = call(server.port, "GET", "/api/models")[2]
        assert [u["slug"] for u in catalog["unavailable"]] == ["odd"] and "NaN" in catalog["unavailable"][0]["reason"]
        assert call(server.port, "POST", "/api/models/bert-base/datalab", {"text": "a [MASK] ."})[0] == 503
        first = children(server.process.pid)
        assert len(first) == 2
        os.kill(first[0], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (first[0] in (now := children(server.process.pid)) or len(now) < 2):
            time.sleep(0.2)
        assert first[0] not in now and len(now) == 2 and server.process.poll() is None, \
            (tree.manifests.parent / "gunicorn.log").read_text()[-3000:]
        for _ in range(6):  # on fresh connections, so that the new worker answers some
            assert [status_of(server.port, p) for p in ("/models/bert-base", "/models/bert", "/api/models")] \
                == [200, 200, 200]
    finally:
        server.stop()


def test_three_workers_without_redis_share_jobs_reports_and_the_budget(tree):
    tree.add("bert", BERT_MANIFEST.read_bytes(), run_py=slow_replay(4))
    server = Gunicorn(tree, workers=3, COMPUTE_BUDGET="8 per hour")
    try:
        posts = [call(server.port, "POST", "/api/models/bert/verifications") for _ in range(3)]
        assert [status for status, _, _ in posts] == [202, 202, 202]
        assert len({body["id"] for _, _, body in posts}) == 1  # identical POSTs share one run
        location = posts[0][1]["Location"]
        states = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, _, job = call(server.port, "GET", location)
            assert status == 200, job  # every worker knows the job
            states.append(job["state"])
            if job["state"] == "done":
                break
            time.sleep(0.2)
        assert job["report"]["status"] == "passed", job
        assert "running" in states
        latest = [call(server.port, "GET", "/api/models/bert/verifications/latest")[2] for _ in range(6)]
        assert all(report == latest[0] for report in latest) and latest[0]["status"] == "passed"
        cached = call(server.port, "POST", "/api/models/bert/verifications")
        assert cached[0] == 200 and cached[2]["cached"] is True
        # 1 run started so far (the two other POSTs shared it, the kept report started nothing); the budget of
        # 8 holds across the workers and fresh connections, and a refused request spends none of it.
        assert call(server.port, "POST", "/api/models/bert/runs", {"input_ids": [1]})[0] == 400
        statuses = [call(server.port, "POST", "/api/models/bert/corruptions",
                         {"input_ids": [1, 4, 5, 2, 6, 2], "seed": seed})[0] for seed in range(8)]
        assert statuses == [200] * 7 + [429]
    finally:
        server.stop()


def test_a_killed_web_workers_job_ends_as_an_error_and_its_recipe_worker_is_gone(tree):
    # The replay is held far past the test's limits, so that only the recipe worker's watch on its web worker
    # can end it in time; let go once that is seen, so that the new job at the end does not hold the server's
    # stop (a quick shutdown still lets a running verification end).
    flag = tree.manifests.parent / "hold-the-replay"
    flag.touch()
    tree.add("bert", BERT_MANIFEST.read_bytes(), run_py=held_replay(flag, 120))
    server = Gunicorn(tree, workers=2, JOB_STALE_SECONDS=3)
    try:
        status, headers, job = call(server.port, "POST", "/api/models/bert/verifications")
        assert status == 202
        if job["state"] != "running":
            job = eventually(lambda: call(server.port, "GET", headers["Location"])[2],
                             lambda job: job["state"] == "running", seconds=60, every=0.2)
        owner = int(server_record(tree, f"verification-job:{job['id']}")["owner"].rsplit(":", 1)[1])
        # The web worker's own processes: the resource tracker, the forkserver, and what it forked, the recipe
        # workers (one of them running the held replay).
        eventually(lambda: [pid for server in children(owner) for pid in children(server)], seconds=60, every=0.2)
        recipe_workers = descendants(owner)
        assert len(recipe_workers) >= 3, "the web worker runs its recipes in processes of its own"
        os.kill(owner, signal.SIGKILL)
        killed = time.monotonic()
        while time.monotonic() - killed < 30:
            status, _, job = call(server.port, "GET", headers["Location"])
            assert status == 200
            if job["state"] == "done":
                break
            time.sleep(0.25)
        assert job["state"] == "done" and job["report"]["status"] == "error"
        assert "stopped before it finished" in job["report"]["message"]
        assert time.monotonic() - killed < 15
        while any(alive(pid) for pid in recipe_workers) and time.monotonic() - killed < 15:
            time.sleep(0.2)
        assert not any(alive(pid) for pid in recipe_workers), "an orphaned recipe worker outlived its web worker"
        flag.unlink()
        again = call(server.port, "POST", "/api/models/bert/verifications")
        assert again[0] == 202 and again[2]["id"] != job["id"]  # a dead job does not block a new one
    finally:
        server.stop()


def test_a_recycled_worker_waits_for_a_run_that_may_still_finish(monkeypatch):
    import runpy

    for timeout in ("120", "300"):
        monkeypatch.setenv("TENSORVIZ_RECIPE_TIMEOUT", timeout)
        conf = runpy.run_path(str(PROJECT_ROOT / "gunicorn.conf.py"))
        assert conf["graceful_timeout"] > float(timeout)


def test_gunicorn_believes_no_forwarded_scheme_without_proxies_and_a_malformed_chunked_body_is_a_400(tree):
    tree.add("bert")
    server = Gunicorn(tree, workers=1)  # PROXY_FIX 0: no proxy is trusted, not even on loopback
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/api/models", headers={"X-Forwarded-Proto": "https", "Connection": "close"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Strict-Transport-Security") is None
        conn.close()
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
            raw.sendall(b"POST /api/models/bert/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n")
            reply = b""
            while chunk := raw.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.split(b"\r\n")[0] == b"HTTP/1.1 400 BAD REQUEST", reply[:300]
        assert json.loads(body)["error"]["message"].startswith("body: cannot be read")
    finally:
        server.stop()
    server = Gunicorn(tree, workers=1, PROXY_FIX=1)  # one proxy in front: its scheme is believed
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/api/models", headers={"X-Forwarded-Proto": "https", "Connection": "close"})
        assert conn.getresponse().getheader("Strict-Transport-Security") is not None
        conn.close()
    finally:
        server.stop()


class Production:
    """`scripts/serve-production`: nginx in front of gunicorn, as the README's production section starts it."""

    def __init__(self, tree: ModelTree, workers: int = 2, **settings) -> None:
        self.port = free_port()
        env = server_env(tree, workers) | {
            "TENSORVIZ_RUN_DIR": str(tree.manifests.parent / "run"), "TENSORVIZ_LISTEN": f"127.0.0.1:{self.port}",
            "TENSORVIZ_UPSTREAM": f"127.0.0.1:{free_port()}"}
        env |= {f"TENSORVIZ_{k}": json.dumps(v) for k, v in settings.items()}
        self.log = open(tree.manifests.parent / "production.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([str(PROJECT_ROOT / "scripts" / "serve-production")], cwd=PROJECT_ROOT,
                                        env=env, stdout=self.log, stderr=self.log, start_new_session=True)
        wait_until_answering(self, "serve-production")

    def web_tier(self) -> list[int]:
        """gunicorn's arbiter and its workers."""
        arbiter = [pid for pid in children(self.process.pid)
                   if b"gunicorn" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        return arbiter + [pid for pid in arbiter for pid in children(pid)]

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def test_the_production_setup_holds_a_slowloris_and_its_own_refusals_carry_the_headers(tree):
    """200 connections sending a header line every 2 s hold nginx's connections, not gunicorn's threads: other
    clients' p99 stays under 1 s; what nginx refuses itself is answered as the app would (JSON under /api and
    where it could not read the path, the site's error page elsewhere) with the app's security headers."""
    tree.add("bert")
    server = Production(tree, workers=1)
    slow = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(b"GET /api/models HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        latencies = []
        started = time.monotonic()
        while time.monotonic() - started < 8:
            for s in slow:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
            for _ in range(10):
                begun = time.monotonic()
                assert call(server.port, "GET", "/api/models")[0] == 200
                latencies.append(time.monotonic() - begun)
            time.sleep(1)
        latencies.sort()
        assert len(latencies) >= 40 and latencies[int(len(latencies) * 0.99) - 1] < 1.0, latencies[-5:]
        big = json.dumps({"text": "x" * 70_000})  # past MAX_CONTENT_LENGTH: refused by nginx, which read the path
        for method, path, body, status, kind in (
                ("GET", "/models/" + "x" * 9000, None, 414, "application/json"),  # a path nginx cannot read
                ("POST", "/api/models/gpt/runs", big, 413, "application/json"),
                ("POST", "/models/gpt", big, 413, "text/html"),
                ("TRACE", "/api/models", None, 405, "application/json"),  # nginx's own 405, with Allow
                ("GET", "/api/models/bert", None, 412, "application/json")):  # nginx's own If-Match check
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request(method, path, body=body, headers={"Content-Type": "application/json", "If-Match": '"old"'})
            refused = conn.getresponse()
            assert refused.status == status and refused.getheader("Content-Type") == kind, path[:30]
            assert status != 405 or refused.getheader("Allow") == "GET, HEAD, POST, OPTIONS"
            assert refused.getheader("X-Content-Type-Options") == "nosniff"
            assert refused.getheader("Content-Security-Policy", "").startswith("default-src 'self'")
            text = refused.read().decode()
            assert (json.loads(text)["error"]["status"] == status if kind == "application/json"
                    else f"Error {status}" in text and "Request body over 65536 bytes." in text)
            conn.close()
        served = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        served.request("GET", "/api/models/bert")
        answer = served.getresponse()
        assert len(answer.headers.get_all("X-Content-Type-Options")) == 1  # the app's copy, not two
        served.close()
        # Whatever nginx lets through, gunicorn reads: a long link, a long header line, many headers reach the
        # app (gunicorn's own plain pages, e.g. its 414 past 4094 bytes, never answer).
        for path, headers in (("/models/bert?x=" + "a" * 8100, {}), ("/models/bert", {"X-Long": "a" * 8180}),
                              ("/models/bert", {f"X-{i}": "1" for i in range(150)})):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", path, headers=headers)
            reached = conn.getresponse()
            assert reached.status == 200 and reached.getheader("Content-Type") == "text/html; charset=utf-8", path[:30]
            conn.close()
    finally:
        for s in slow:
            s.close()
        server.stop()


def test_the_proxy_serves_the_answers_the_app_keeps_without_the_web_tier_and_passes_on_everything_else(tree):
    """nginx keeps a manifest, a model page and the catalog for PROXY_CACHE_SECONDS: with gunicorn stopped
    (SIGSTOP) they are still answered, byte for byte; a conditional GET, a query string, a job or a POST reach
    the app (and wait for it)."""
    tree.add("bert")
    server = Production(tree, workers=1, PROXY_CACHE_SECONDS=60)
    kept = ["/api/models/bert", "/models/bert", "/api/models"]
    try:
        first = {path: raw_get(server.port, path) for path in kept}
        assert all(status == 200 for status, _ in first.values())
        for pid in server.web_tier():
            os.kill(pid, signal.SIGSTOP)
        try:
            for path in kept:
                begun = time.monotonic()
                assert raw_get(server.port, path) == first[path] and time.monotonic() - begun < 1, path
            etag = call(server.port, "GET", "/api/models/bert")[1]["ETag"]
            for method, path, headers in (("GET", "/api/models/bert", {"If-None-Match": etag}),
                                          ("GET", "/api/models/bert?fields=1", {}),
                                          ("GET", "/api/models/bert/files", {}),
                                          ("POST", "/api/models/bert/verifications", {})):
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
                conn.request(method, path, headers=headers)
                with pytest.raises(TimeoutError):  # it reached the stopped web tier
                    conn.getresponse()
                conn.close()
        finally:
            for pid in server.web_tier():
                os.kill(pid, signal.SIGCONT)
        assert call(server.port, "GET", "/api/models/bert/files")[0] == 200
    finally:
        server.stop()


def test_a_post_after_the_web_tier_let_an_idle_connection_go_is_never_a_502(tree):
    """gunicorn closes a connection idle for KEEPALIVE_SECONDS; nginx closes its idle ones to gunicorn first, so
    that it never sends a request on one gunicorn is closing (it was reset, and nginx cannot resend a POST)."""
    from concurrent.futures import ThreadPoolExecutor

    tree.add("bert")
    server = Production(tree, workers=1, KEEPALIVE_SECONDS=1)
    try:
        statuses = []
        with ThreadPoolExecutor(16) as burst:
            for pause in (1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35):  # around the moment gunicorn lets go
                statuses += burst.map(lambda _: call(server.port, "POST", "/api/models/bert/interventions", {})[0],
                                      range(16))
                time.sleep(pause)
        assert set(statuses) == {400}, statuses  # the app's own refusal of an empty body, every time
    finally:
        server.stop()


def raw_get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()
