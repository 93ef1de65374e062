"""A learner's variant through the API beside `python train.py` with the same knobs alone, on the same machine in
the same run.

    python bench/variants.py [--models mlp,gcn,lenet] [--repeat N]

For each model, in turn (one training at a time, so that neither takes the other's core):
  - `python train.py --knob name=value ... --out <tmp>` in the recipe folder, as a reader runs it (it starts again
    with the kit's kernels);
  - POST /api/models/<slug>/variants with the same knobs on an app with the local executor and a fresh shared state
    (nothing kept), polled every 0.1 s: the seconds until its training ended (the job says it records), which
    train.py alone is held to (goal: at most 1.1x), and until the variant was made (recorded and kept too);
and prints the median of each and the ratio of the training's.
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

KNOBS = {  # a variant of each, a knob or two moved
    "mlp": {"data": "circles", "hidden": 6},
    "gcn": {"labelled": 2, "hidden": 8},
    "lenet": {"epochs": 10, "train_size": 500},
    "vae": {"beta": 4.0, "epochs": 50},
    "dqn": {"gamma": 0.8},
}


def train_alone(slug: str) -> float:
    """Seconds train.py with the knobs takes in the recipe folder, writing the variant to a folder of its own."""
    knobs = [arg for name, value in KNOBS[slug].items() for arg in ("--knob", f"{name}={value}")]
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, "train.py", *knobs, "--out", out], cwd=ROOT / "recipes" / slug, check=True,
                       capture_output=True)
        return time.perf_counter() - started


def through_the_api(slug: str) -> tuple[float, float]:
    """Seconds from POST until the variant's training ended, and until it was made, on an app of its own."""
    from app import create_app
    from app.services.config import TestConfig
    from app.services.parts import parts

    with tempfile.TemporaryDirectory() as state:
        app = create_app(type("Bench", (TestConfig,), {"STATE_PATH": f"{state}/state.sqlite3"}))
        client = app.test_client()
        try:
            started = time.perf_counter()
            answer = client.post(f"/api/models/{slug}/variants", json={"knobs": KNOBS[slug]})
            assert answer.status_code == 202, answer.get_json()
            trained = None
            while True:
                job = client.get(answer.headers["Location"]).get_json()
                if trained is None and (job["stage"] == "recording" or job["state"] == "done"):
                    trained = time.perf_counter() - started
                if job["state"] == "done":
                    break
                time.sleep(0.1)
            made = time.perf_counter() - started
            assert job["report"]["status"] == "made", job["report"]
            return trained, made
        finally:
            parts(app).pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,gcn,lenet")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':8} {'train.py alone':>15} {'API: trained':>13} {'ratio':>6} {'API: made':>10}"
          f"   (median of {args.repeat})")
    for slug in args.models.split(","):
        solo, trained, made = [], [], []
        for _ in range(args.repeat):
            solo.append(train_alone(slug))
            t, m = through_the_api(slug)
            trained.append(t)
            made.append(m)
        a, b, c = statistics.median(solo), statistics.median(trained), statistics.median(made)
        print(f"{slug:8} {a:14.2f}s {b:12.2f}s {b / a:5.2f}x {c:9.2f}s")


if __name__ == "__main__":
    main()
