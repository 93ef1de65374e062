"""A reader's first change through the production server, with other readers about: how often its run is kept.

    python bench/kept_across_workers.py [--rounds N] [--pause S] [--warm-up S]

`scripts/serve-production` (nginx in front of gunicorn's workers, each with recipe processes of its own) is started
twice on a fresh state: with the recipe processes of the machine sharing the runs they keep (`SHARED_RUNS_DIR`, the
default) and with each keeping its own (`SHARED_RUNS_DIR=null`). In each, after the workers have warmed up, one
reader runs an input of their own in the LSTM's lab (24 tokens drawn anew each round) and, `--pause` later, asks
What if? with the first module zeroed, while two other readers GET manifests without pause (so that the web workers
are busy, and a reader's next request may reach another one). Printed: how many first changes found their run kept
(`plain_run_kept`), and the median time of a What if? against the lab run before it (each as the reader waits).
"""

import argparse
import json
import random
import statistics
import tempfile
import threading
import time

from servers import production, request

MODEL = "lstm"


def rounds_through(base: str, rounds: int, pause: float) -> tuple[int, list[float]]:
    """How many of `rounds` first changes were kept, and each change's time over its lab run's."""
    rng, kept, ratios, model = random.Random(), 0, [], MODEL
    layers = json.loads(request("GET", f"{base}/api/models/{model}")[2])["layers"]
    node = next(layer["id"] for layer in layers if layer["kind"] in ("layer", "module") and "@" not in layer["id"])
    for _ in range(rounds):
        asked = {"tokens": [rng.randint(0, 1) for _ in range(24)]}  # an input of the reader's own, new each round
        time.sleep(pause)
        started = time.perf_counter()
        status, _, ran = request("POST", f"{base}/api/models/{model}/runs", json.dumps(asked).encode())
        lab = time.perf_counter() - started
        if status != 200:
            raise SystemExit(f"the lab run answered {status}: {ran[:200]!r}")
        time.sleep(pause)
        change = {"request": json.loads(ran)["request"], "interventions": [{"node": node, "action": "zero"}]}
        started = time.perf_counter()
        status, _, answer = request("POST", f"{base}/api/models/{model}/interventions", json.dumps(change).encode())
        if status != 200:
            raise SystemExit(f"What if? answered {status}: {answer[:200]!r}")
        ratios.append((time.perf_counter() - started) / lab)
        kept += bool(json.loads(answer)["plain_run_kept"])
    return kept, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds a reader takes between two requests")
    parser.add_argument("--warm-up", type=float, default=60.0, help="seconds the workers are given to warm up")
    options = parser.parse_args()
    print(f"{options.rounds} first changes to a new {MODEL} lab input, {options.pause:g} s after its run, "
          "two other readers GETting manifests meanwhile")
    print(f"{'kept runs':<28} {'kept':>8} {'what if? / lab run (median)':>28}")
    for label, shared in (("shared by the machine", None), ("in each process alone", "null")):
        with tempfile.TemporaryDirectory(prefix="tensorviz-bench-") as folder:
            settings = {"TENSORVIZ_STATE_PATH": f"{folder}/state.sqlite3",  # no answer kept from an earlier run
                        "TENSORVIZ_SHARED_RUNS_DIR": shared or f"{folder}/runs",
                        "TENSORVIZ_COMPUTE_BUDGET": "100000 per minute"}  # every reader here is one loopback client
            with production(settings) as base:
                time.sleep(options.warm_up)  # every recipe process keeps the recorded cases first
                stop = threading.Event()

                def other_reader(stop: threading.Event = stop, base: str = base) -> None:
                    while not stop.is_set():
                        request("GET", f"{base}/api/models/{random.choice(['gpt', 'bert', 'vit'])}?v={random.random()}")

                others = [threading.Thread(target=other_reader, daemon=True) for _ in range(2)]
                for thread in others:
                    thread.start()
                try:
                    kept, ratios = rounds_through(base, options.rounds, options.pause)
                finally:
                    stop.set()
                    for thread in others:
                        thread.join()
        print(f"{label:<28} {kept:>4} of {options.rounds:<3} {statistics.median(ratios):>27.2f}x")


if __name__ == "__main__":
    main()
