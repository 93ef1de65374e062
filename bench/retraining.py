"""Retraining through the API beside train.py run alone, on the same machine in the same run.

    python bench/retraining.py [--models gcn,lenet,mlp] [--repeat N]

For each model, in turn (one training at a time, so that neither takes the other's core):
  - `python train.py --check` in the recipe folder, as a reader runs it (it starts again with the kit's kernels);
  - POST /api/models/<slug>/retrainings on an app with the local executor and a fresh shared state (nothing
    kept), polled every 0.1 s until the report: the whole of what a client waits, the job's own threads and the
    trainer process included;
and prints the median of each and their ratio (goal: at most 1.1x).
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def train_alone(slug: str) -> float:
    """Seconds `python train.py --check` takes in the recipe folder (exit status 0 required)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "train.py", "--check"], cwd=ROOT / "recipes" / slug, check=True,
                   capture_output=True)
    return time.perf_counter() - started


def through_the_api(slug: str) -> float:
    """Seconds from POST to the report of a retraining that nothing kept, on an app of its own."""
    from app import create_app
    from app.services.config import TestConfig
    from app.services.parts import parts

    with tempfile.TemporaryDirectory() as state:
        app = create_app(type("Bench", (TestConfig,), {"STATE_PATH": f"{state}/state.sqlite3"}))
        client = app.test_client()
        try:
            started = time.perf_counter()
            answer = client.post(f"/api/models/{slug}/retrainings")
            assert answer.status_code == 202, answer.get_json()
            while True:
                job = client.get(answer.headers["Location"]).get_json()
                if job["state"] == "done":
                    break
                time.sleep(0.1)
            took = time.perf_counter() - started
            assert job["report"]["status"] == "passed", job["report"]
            return took
        finally:
            parts(app).pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gcn,lenet,mlp")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':8} {'train.py alone':>15} {'through the API':>16} {'ratio':>6}   (median of {args.repeat})")
    for slug in args.models.split(","):
        solo, api = [], []
        for _ in range(args.repeat):
            solo.append(train_alone(slug))
            api.append(through_the_api(slug))
        a, b = statistics.median(solo), statistics.median(api)
        print(f"{slug:8} {a:14.2f}s {b:15.2f}s {b / a:5.2f}x")


if __name__ == "__main__":
    main()
