"""A verification storm: many concurrent POSTs, every one answered, while GETs stay fast for others.

    python bench/storm.py [--requests 400] [--threads 32]

Against gunicorn (gunicorn.conf.py) on loopback, once with the embedded default (one SQLite file shared
by the workers) and once with a real Redis. The POSTs mix verifications with
distinct what-if runs, so that the recipe workers and their bounded queues fill up. Prints how every
POST was answered (report 200, job 202, refused 429; nothing else is expected), how many went
unanswered (must be 0), and the latency of GET /api/models/bert before and during the storm.
"""

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import Redis, gunicorn, request  # noqa: E402


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def probe(base: str, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        status, _, _ = request("GET", base + "/api/models/bert")
        latencies.append((time.perf_counter() - started) * 1000)
        assert status == 200
        time.sleep(0.02)


def post(base: str, n: int) -> int | str:
    try:
        if n % 4 == 0:
            return request("POST", base + "/api/models/bert/verifications")[0]
        rng = random.Random(n)
        body = {"input_ids": [1] + [rng.randrange(4, 16) for _ in range(4)] + [2],
                "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [rng.randrange(1, 5)]}
        return request("POST", base + "/api/models/bert/runs", json.dumps(body).encode())[0]
    except Exception as exc:  # counted, not raised: a lost request is what this measures
        return type(exc).__name__


def warm_up(base: str) -> None:
    """Wait until the recipe workers the gunicorn workers start at boot answer runs."""
    deadline = time.monotonic() + 180
    answered = 0
    while answered < 12 and time.monotonic() < deadline:
        answered += post(base, 4 * answered + 1) == 200
        time.sleep(0.1)


def storm(base: str, args) -> tuple[list, float, list[float], list[float]]:
    """Probe the quiet server, then storm it while probing: the answers, the storm's seconds, the probes."""
    warm_up(base)
    quiet: list[float] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(base, stop, quiet))
    prober.start()
    time.sleep(3)
    stop.set()
    prober.join()

    during: list[float] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(base, stop, during))
    prober.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        answers = list(pool.map(lambda n: post(base, n), range(args.requests)))
    storm_seconds = time.perf_counter() - started
    stop.set()
    prober.join()
    return answers, storm_seconds, quiet, during


def report(name: str, args, answers: list, storm_seconds: float, quiet: list[float], during: list[float]) -> None:
    counts = Counter(answers)
    unanswered = sum(n for status, n in counts.items() if not isinstance(status, int))
    unexpected = sum(n for status, n in counts.items() if isinstance(status, int) and status not in (200, 202, 429))
    print(f"[{name}] {args.requests} POSTs from {args.threads} threads in {storm_seconds:.1f} s "
          "(1 in 4 a verification, the rest distinct what-if runs)")
    print("answers: " + ", ".join(f"{status}: {n}" for status, n in sorted(counts.items(), key=str)))
    print(f"unanswered: {unanswered}   unexpected statuses: {unexpected}")
    for when, values in (("before the storm", quiet), ("during the storm", during)):
        print(f"GET /api/models/bert {when}: p50 {statistics.median(values):.1f} ms, "
              f"p99 {percentile(values, 99):.1f} ms ({len(values)} probes)")
    print(f"p50 ratio during/before: {statistics.median(during) / statistics.median(quiet):.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    env = {"TENSORVIZ_COMPUTE_BUDGET": '"1000000 per minute"', "TENSORVIZ_STATE_PATH": str(folder / "state.sqlite3")}
    with gunicorn("wsgi:app", env) as base:
        report("embedded (SQLite)", args, *storm(base, args))
    with Redis() as redis, gunicorn("wsgi:app", env | {"REDIS_URL": redis.url}) as base:
        report("Redis", args, *storm(base, args))
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
