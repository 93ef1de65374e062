"""Verification latency, cold / warm / cached, against the raw compute time of the same cases.

    python bench/verify.py [--repeat N]

This process plays the web worker: it creates the app and calls the API through Flask's WSGI test
client, so its resident memory is what a web worker holds (it never imports torch). The raw compute
time is measured in a separate process that imports the recipe directly, in the same run.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.services.extensions import models, state  # noqa: E402
from app.services.parts import parts  # noqa: E402
from app.services.verification import cache_key  # noqa: E402

RAW_COMPUTE = """
import json, statistics, sys, time
import torch
sys.path.insert(0, "recipes/bert")
import run
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
run.replay()  # first call pays for lazy initialisation
times = []
for _ in range({repeat}):
    start = time.perf_counter()
    run.replay()
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def rss_mib(pid: str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed_verification(client) -> tuple[float, dict]:
    start = time.perf_counter()
    response = client.post("/api/models/bert/verifications")
    if response.status_code == 202:
        location = response.headers["Location"]
        while (job := client.get(location).get_json())["state"] != "done":
            time.sleep(0.01)
        report = job["report"]
    else:
        report = response.get_json()
    return time.perf_counter() - start, report


def warm_runs(app, client, repeat: int) -> tuple[list[float], list[float]]:
    """Verifications with the worker up and no report kept: their latencies and the compute each reported."""
    times, compute = [], []
    for _ in range(repeat):
        with app.app_context():
            state.store.delete(cache_key(models.get("bert")))
        seconds, report = timed_verification(client)
        assert report["status"] == "passed", report.get("message")
        times.append(seconds)
        compute.append(report["compute_seconds"])
    return times, compute


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    # The default VERIFY_WAIT: a verification that ends within it is answered by its POST (200 with the report).
    app = create_app({"STATE_PATH": None})  # a private store, emptied below
    client = app.test_client()
    rss_start = rss_mib()

    cold, report = timed_verification(client)
    assert report["status"] == "passed", report.get("message")
    warm_times, warm_compute = warm_runs(app, client, args.repeat)
    for pid in parts(app).pool.pids():  # a crashed worker: the next run forks a new one from the server
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)  # the process ends
    replaced = warm_runs(app, client, 1)[0][0]
    # VERIFY_WAIT 0: every POST answers 202 and the client polls the job every 10 ms.
    app.config["VERIFY_WAIT"] = 0.0
    polled_times, polled_compute = warm_runs(app, client, args.repeat)
    compute_times = warm_compute + polled_compute
    cached_times = [timed_verification(client)[0] for _ in range(args.repeat * 10)]
    rss_web = rss_mib()
    worker_rss = [rss_mib(str(pid)) for pid in parts(app).pool.pids()]
    torch_in_web = "torch" in sys.modules
    parts(app).pool.shutdown()

    raw = json.loads(subprocess.run(
        [sys.executable, "-c", RAW_COMPUTE.format(repeat=args.repeat)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout)
    raw_median = statistics.median(raw)
    worker_median = statistics.median(compute_times)

    def row(name: str, seconds: float) -> str:
        return (f"{name:40} {seconds * 1000:10.2f} ms   {seconds / raw_median:7.1f} x raw"
                f"   {seconds / worker_median:7.1f} x worker compute")

    print(f"verification of bert, {args.repeat} repeats (medians)")
    print(row("raw compute (recipe in-process)", raw_median))
    print(row("compute inside the worker", worker_median))
    print(row("cold (start the fork server: import torch)", cold))
    print(row("a killed worker replaced (forked), run", replaced))
    print(row("warm, answered by its POST", statistics.median(warm_times)))
    # The machine's speed drifts between runs; each run against the compute it reported holds still.
    own = statistics.median(t / c for t, c in zip(warm_times, warm_compute, strict=True))
    print(f"{'  each against its own compute':40} {'':10}      {'':7}       {own:7.2f} x worker compute")
    print(row("warm, 202 then polled every 10 ms", statistics.median(polled_times)))
    print(row("cached report", statistics.median(cached_times)))
    print(f"{'web process RSS':40} {rss_start:10.1f} MiB at start, {rss_web:.1f} MiB after "
          f"(torch imported: {torch_in_web})")
    for pid_rss in worker_rss:
        print(f"{'recipe worker RSS':40} {pid_rss:10.1f} MiB")


if __name__ == "__main__":
    main()
