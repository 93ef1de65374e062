"""Start real servers on loopback for the benchmarks: gunicorn with the project's config, and Redis."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {seconds} s")


@contextmanager
def gunicorn(app: str, env: dict | None = None, ready_path: str = "/") -> Iterator[str]:
    """`gunicorn -c gunicorn.conf.py APP` on a free loopback port; yields its base URL."""
    port = free_port()
    log = open(ROOT / "bench" / f".gunicorn-{port}.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}",
         "--access-logfile", "/dev/null", app],
        cwd=ROOT, env=os.environ | (env or {}), stdout=log, stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base + ready_path)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # a worker that outlived its master, and its recipe processes
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
        Path(log.name).unlink(missing_ok=True)


@contextmanager
def production(env: dict | None = None) -> Iterator[str]:
    """`scripts/serve-production` (nginx in front of gunicorn) on free loopback ports; yields nginx's base URL."""
    port = free_port()
    run = ROOT / "bench" / f".run-{port}"
    log = open(ROOT / "bench" / f".production-{port}.log", "w")  # noqa: SIM115 - closed below
    settings = {"TENSORVIZ_LISTEN": f"127.0.0.1:{port}", "TENSORVIZ_UPSTREAM": f"127.0.0.1:{free_port()}",
                "TENSORVIZ_RUN_DIR": str(run)}
    process = subprocess.Popen([str(ROOT / "scripts" / "serve-production")], cwd=ROOT,
                               env=os.environ | (env or {}) | settings, stdout=log, stderr=log,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base + "/")
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        log.close()
        Path(log.name).unlink(missing_ok=True)
        shutil.rmtree(run, ignore_errors=True)


class Redis:
    """A real redis-server on a loopback port, without persistence; stop() and start() for the drills."""

    def __init__(self) -> None:
        if not shutil.which("redis-server"):
            raise SystemExit("redis-server is needed: scripts/install-test-packages")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def __enter__(self) -> "Redis":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def request(method: str, url: str, body: bytes | None = None, timeout: float = 60,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One HTTP request; returns status, headers and body (as sent: not decompressed), also for 4xx and 5xx."""
    sent = ({"Content-Type": "application/json"} if body else {}) | (headers or {})
    req = urllib.request.Request(url, data=body, method=method, headers=sent)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
