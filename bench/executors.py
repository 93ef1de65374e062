"""The executors side by side, in one run: uncached lab throughput, and cached GETs while the compute is busy.

    python bench/executors.py [--seconds 10] [--clients 6] [--split-cores] [--proxy] [--rounds 1]

Each row is gunicorn (gunicorn.conf.py) on loopback with a real Redis (started here) holding the shared state:
`local` (each web worker runs recipes in its own recipe process), then `celery` with one and with two
worker processes (`celery -A compute_worker worker --concurrency N`). For each: `--clients` threads POST
GPT lab runs that no cache can answer (each prompt new) for `--seconds`: answered runs per second; and wrk's
p50/p99 of a cached GET (`/api/models/gpt`) with the compute idle and while those clients keep it busy;
`--rounds N` alternates the two N times, so that the idle rounds show how far the p99 moves by itself. Each
row ends with every gunicorn web worker's resident memory after the load.
With `--split-cores` the web tier (nginx, gunicorn and, with `local`, its recipe processes) runs on all cores but
the last, and what a deployment runs on other machines on the last: the clients, wrk, Redis and the Celery
workers, these at the idle scheduling class (SCHED_IDLE: they take only what the clients, wrk and Redis leave,
so that the compute tier delays none of them, as on machines of its own). With `--proxy`
each server is the documented production setup (`scripts/serve-production`: nginx in front of gunicorn, which
keeps the cached answers for PROXY_CACHE_SECONDS), and every request goes through nginx.
BENCH_CELERY_WORKERS (default "1,2") lists the Celery worker counts, in order.
"""

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import wrk  # noqa: E402
from servers import ROOT, Redis, gunicorn, production, request  # noqa: E402

WORKERS = tuple(int(n) for n in os.environ.get("BENCH_CELERY_WORKERS", "1,2").split(","))
SETTINGS = {"TENSORVIZ_COMPUTE_BUDGET": '"1000000 per minute"', "TENSORVIZ_RECIPE_QUEUE": "64"}


@contextmanager
def on_cores(cores: set[int] | None):
    """Processes started inside run on `cores` (a child inherits its parent's affinity); None: where they may."""
    before = os.sched_getaffinity(0)
    if cores:
        os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def idle_class() -> None:
    """This process at the idle scheduling class: it runs only when nothing else on its cores wants to."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


@contextmanager
def celery_workers(broker: str, concurrency: int, apart: bool):
    """`apart`: at the idle scheduling class, on this process's cores (--split-cores)."""
    log = open(ROOT / "bench" / f".celery-{os.getpid()}.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "compute_worker", "worker", "--concurrency", str(concurrency),
         "--without-mingle", "--without-gossip", "--loglevel", "info"],
        cwd=ROOT, env=os.environ | {"TENSORVIZ_REDIS_URL": broker}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=idle_class if apart else None)
    try:
        deadline = time.monotonic() + 120
        while "ready." not in Path(log.name).read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(Path(log.name).read_text())
            time.sleep(0.2)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()
        Path(log.name).unlink(missing_ok=True)


def prompts():
    """Prompts no run has seen: every 8-token sequence over the GPT's 11 tokens, in turn."""
    for tokens in itertools.product(range(11), repeat=8):
        yield list(tokens)


def saturate(base: str, clients: int, stop: threading.Event, fresh) -> dict:
    """POST uncached GPT runs from `clients` threads until `stop`; counts by status."""
    counts: dict[int, int] = {}
    lock = threading.Lock()

    def client() -> None:
        while not stop.is_set():
            with lock:
                body = json.dumps({"input_ids": next(fresh)}).encode()
            status, _, _ = request("POST", f"{base}/api/models/gpt/runs", body, timeout=120)
            with lock:
                counts[status] = counts.get(status, 0) + 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(timeout=130)
    return counts


def measure(base: str, seconds: int, clients: int, fresh, rounds: int) -> dict:
    """`rounds` times: wrk with the compute idle, then while the clients keep it busy. The idle rounds give the
    noise a cached GET's p99 has here by itself, against which the busy ones are read."""
    for _ in range(3):  # warm: the recipe processes have started and imported the recipe
        request("POST", f"{base}/api/models/gpt/runs", json.dumps({"input_ids": next(fresh)}).encode(), timeout=120)
    row: dict = {"runs/s": [], "other": {}, "idle p50": [], "idle p99": [], "busy p50": [], "busy p99": []}
    for _ in range(rounds):
        idle = wrk("GET", f"{base}/api/models/gpt", seconds, 8)
        stop = threading.Event()
        counts: dict = {}
        runner = threading.Thread(target=lambda c=counts, s=stop: c.update(saturate(base, clients, s, fresh)))
        started = time.monotonic()
        runner.start()
        busy = wrk("GET", f"{base}/api/models/gpt", seconds, 8)
        stop.set()
        runner.join()
        row["runs/s"].append(counts.get(200, 0) / (time.monotonic() - started))
        for status, count in counts.items():
            if status != 200:
                row["other"][status] = row["other"].get(status, 0) + count
        for name, figures in (("idle", idle), ("busy", busy)):
            row[f"{name} p50"].append(figures["p50"])
            row[f"{name} p99"].append(figures["p99"])
    row["web MiB"] = web_workers_mib()  # after the load: pages rendered, runs answered
    return row


def web_workers_mib() -> list[float]:
    """The resident memory of each gunicorn web worker running now, in MiB: the processes whose command line
    is gunicorn's and whose parent's is too (the master is left out; recipe processes run other commands)."""
    found = {}
    for folder in Path("/proc").glob("[0-9]*"):
        try:
            if b"gunicorn" not in (folder / "cmdline").read_bytes():
                continue
            fields = dict(line.split(":", 1) for line in (folder / "status").read_text().splitlines())
        except OSError:
            continue  # the process ended meanwhile
        found[folder.name] = (fields["PPid"].strip(), int(fields["VmRSS"].split()[0]) / 1024)
    return [mib for parent, mib in found.values() if parent in found]


def spread(figures: list[float], unit: str = "ms") -> str:
    """The median of a row's rounds, and their range where there are several."""
    middle = f"{statistics.median(figures):.2f}{unit}"
    return middle if len(figures) == 1 else f"{middle} ({min(figures):.2f}-{max(figures):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--split-cores", action="store_true")
    parser.add_argument("--proxy", action="store_true", help="serve through nginx (scripts/serve-production)")
    parser.add_argument("--rounds", type=int, default=1, help="idle and busy measurements, alternately, per row")
    args = parser.parse_args()
    web = production if args.proxy else partial(gunicorn, "wsgi:app")
    web_cores = None
    if args.split_cores:
        cores = sorted(os.sched_getaffinity(0))
        web_cores = set(cores[:-1])
        os.sched_setaffinity(0, {cores[-1]})  # this process and every child but the web tier's
    fresh = prompts()
    rows = {}
    with Redis() as redis:
        env = SETTINGS | {"TENSORVIZ_REDIS_URL": redis.url}
        with ExitStack() as stack:
            with on_cores(web_cores):
                base = stack.enter_context(web(env))
            rows["local"] = measure(base, args.seconds, args.clients, fresh, args.rounds)
        for workers in WORKERS:
            with ExitStack() as stack:
                stack.enter_context(celery_workers(redis.url, workers, apart=web_cores is not None))
                with on_cores(web_cores):
                    base = stack.enter_context(web(env | {"TENSORVIZ_EXECUTOR": '"celery"'}))
                rows[f"celery x{workers}"] = measure(base, args.seconds, args.clients, fresh, args.rounds)
    print(f"{args.clients} clients POSTing uncached GPT runs for {args.seconds} s; wrk -c8 GET /api/models/gpt "
          f"(cached) with the compute idle and busy; {os.cpu_count()} cores"
          + (f", the web tier on cores {sorted(web_cores)} and the rest on the last, Celery at SCHED_IDLE"
             if web_cores else "")
          + (", through nginx (serve-production)" if args.proxy else ""))
    print(("median of each row's rounds (lowest-highest); " if args.rounds > 1 else "")
          + "executor, runs/s, x local, idle p50, idle p99, busy p50, busy p99, each web worker's resident "
            "memory after the load, other statuses")
    local = statistics.median(rows["local"]["runs/s"])
    for name, row in rows.items():
        runs = statistics.median(row["runs/s"])
        print(f"{name:<10} {spread(row['runs/s'], '')}  {runs / local:.2f}x  "
              + "  ".join(spread(row[k]) for k in ("idle p50", "idle p99", "busy p50", "busy p99"))
              + "  " + ", ".join(f"{mib:.0f}" for mib in row["web MiB"]) + f" MiB  {row['other'] or ''}")


if __name__ == "__main__":
    main()
