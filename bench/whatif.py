"""What a reader waits for a What if?, through the API, as the server is started: gunicorn with the project's
config on loopback (two web workers, as production runs it: `make serve-production`), the served catalog.

    python bench/whatif.py [--rounds N]

`first after boot`: a What if? asked as soon as the server answers its first page (the recipe processes are
still starting), timed to its answer. Then, for each model's first recorded case, `--rounds` changes no cache has
seen (a `zero`, then a `scale` by a factor of each round's own, on the case's nodes in turn), each timed through
HTTP: the median and the slowest per model, and the median across every change of every model (the page asks
the options first, so each of these runs the changed run beside the plain run the options made). `unseen`: one
change to another recorded case (the second, but a whole test split) with no options asked before it, as an API
client's first. No answer is a kept one: every change is new.
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import gunicorn, request  # noqa: E402


def timed(method: str, url: str, body: dict | None = None) -> tuple[int, float]:
    started = time.perf_counter()
    status = request(method, url, json.dumps(body).encode() if body is not None else None, timeout=300)[0]
    return status, time.perf_counter() - started


def cases_of(base: str, slug: str) -> list[str]:
    return [c["id"] for c in json.loads(request("GET", f"{base}/api/models/{slug}")[2])["experiment"]["cases"]]


def changes(base: str, slug: str, case: str, rounds: int) -> list[dict]:
    """`rounds` changes to the case no cache has seen: each node that can be zeroed and scaled, in turn."""
    status, _, body = request("POST", f"{base}/api/models/{slug}/interventions/options",
                              json.dumps({"case": case}).encode(), timeout=300)
    if status != 200:
        return []
    nodes = [n for n, o in json.loads(body)["nodes"].items() if "scale" in o["actions"]]
    return [{"case": case, "interventions": [{"node": nodes[n % len(nodes)], "action": "scale",
                                              "factor": 1.5 + n / 100}]} for n in range(rounds)] if nodes else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="tensorviz-whatif-")  # no answer kept by an earlier run
    # nor a plain run: a shared runs folder of its own, where the server's default is (in memory where there is one)
    memory = Path("/dev/shm")
    runs = tempfile.mkdtemp(prefix="tensorviz-whatif-runs-", dir=memory if memory.is_dir() else None)
    env = {"WEB_CONCURRENCY": "2", "TENSORVIZ_COMPUTE_BUDGET": '"1000000 per minute"',
           "TENSORVIZ_STATE_PATH": str(Path(state) / "state.sqlite3"), "TENSORVIZ_SHARED_RUNS_DIR": runs}
    with gunicorn("wsgi:app", env) as base:
        change = {"case": "pi", "interventions": [{"node": "h.0.mlp", "action": "zero"}]}
        status, boot = timed("POST", f"{base}/api/models/gpt/interventions", change)
        print(f"first after boot: {boot * 1000:.0f} ms (gpt, status {status})")
        slugs = [m["slug"] for m in json.loads(request("GET", f"{base}/api/models")[2])["models"]]
        every: list[float] = []
        print(f"{'model':12} {'case':12} {'median':>9} {'slowest':>9} {'unseen':>9}  statuses")
        for slug in slugs:
            cases = cases_of(base, slug)
            asked = changes(base, slug, cases[0], args.rounds) if cases else []
            if not asked:
                print(f"{slug:12} {'-':12} (no node to change)")
                continue
            others = [c for c in cases[1:] if c != "test-split"]
            unseen = "-"
            if others:  # the options' node, on a case no request has run
                body = asked[0] | {"case": others[0]}
                status, seconds = timed("POST", f"{base}/api/models/{slug}/interventions", body)
                unseen = f"{seconds * 1000:6.0f} ms" if status == 200 else str(status)
            answers = [timed("POST", f"{base}/api/models/{slug}/interventions", body) for body in asked]
            seconds = [s for _, s in answers]
            every += seconds
            statuses = sorted({status for status, _ in answers})
            print(f"{slug:12} {cases[0]:12} {statistics.median(seconds) * 1000:7.0f} ms {max(seconds) * 1000:7.0f} ms"
                  f" {unseen:>9}  {statuses}", flush=True)
        print(f"median across models: {statistics.median(every) * 1000:.0f} ms; slowest: {max(every) * 1000:.0f} ms")
    shutil.rmtree(runs, ignore_errors=True)


if __name__ == "__main__":
    main()
