"""One abusive client beside three ordinary ones, training variants on one server: are the ordinary ones' variants
kept, and how long do their trainings wait to start?

    python bench/fair_share.py [--seconds 240] [--share 60] [--window 600]

gunicorn (two web workers, gunicorn.conf.py) on loopback with a fresh shared state, VARIANTS_KEPT 12 and
VARIANTS_PER_CLIENT 4 (so that eviction happens within the run), one place to train, and TRAINING_SHARE_SECONDS
`--share` in a TRAINING_SHARE_WINDOW of `--window` seconds (shorter than the defaults, 900 s an hour, so that the
share is met within the run). Each client sends from an address of its own (127.0.0.2 the abusive one, 127.0.0.3-5
the ordinary ones). The abusive client trains long variants (5,000 steps of 16 hidden units, each of new knobs)
without pause for `--seconds`, starting the next as soon as it is let; each ordinary client starts one quick
variant at 15 s, then another every `--every` seconds (80: three each), and opens each of its variants again at
the end. Prints, for each client,
the variants made and refused, each ordinary training's wait from its POST until it ran, and how many of its
variants are still kept at the end.
"""

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import gunicorn  # noqa: E402

ABUSER = "127.0.0.2"
ORDINARY = ["127.0.0.3", "127.0.0.4", "127.0.0.5"]


def ask(base: str, address: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict, dict]:
    """One request from `address` (a loopback address of the client's own): status, headers and JSON body."""
    url = urlparse(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60, source_address=(address, 0))
    try:
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        response = connection.getresponse()
        raw = response.read()
        return response.status, dict(response.getheaders()), json.loads(raw) if raw else {}
    finally:
        connection.close()


class Client:
    def __init__(self, base: str, address: str) -> None:
        self.base, self.address = base, address
        self.made: list[str] = []  # the manifests of the variants it made
        self.refused = 0
        self.waits: list[float] = []  # seconds from a POST to its job running

    def train(self, knobs: dict) -> float | None:
        """Start a variant and follow it to its end: the seconds until its retry is allowed when refused, else None."""
        asked = time.monotonic()
        status, headers, body = ask(self.base, self.address, "POST", "/api/models/mlp/variants", {"knobs": knobs})
        if status == 429:
            self.refused += 1
            return float(headers.get("Retry-After", "1"))
        if status == 200:
            self.made.append(body["manifest"])
            return None
        assert status == 202, (status, body)
        location, running = headers["Location"], False
        while True:
            _, _, job = ask(self.base, self.address, "GET", location)
            if not running and (job["state"] == "running" or job["state"] == "done"):
                running = True
                self.waits.append(time.monotonic() - asked)
            if job["state"] == "done":
                if job["report"]["status"] == "made":
                    self.made.append(job["report"]["variant"]["manifest"])
                return None
            time.sleep(0.25)

    def kept(self) -> int:
        return sum(ask(self.base, self.address, "GET", path)[0] == 200 for path in self.made)


def abuse(client: Client, until: float) -> None:
    k = 0
    while time.monotonic() < until:
        k += 1
        retry = client.train({"steps": 5000 - k, "hidden": 16, "data": "spiral"})
        if retry is not None:
            time.sleep(min(retry, max(0.0, until - time.monotonic())))


def learn(client: Client, n: int, started: float, until: float, every: float) -> None:
    at, k = started + 15 + 5 * n, 0
    while at < until:
        time.sleep(max(0.0, at - time.monotonic()))
        k += 1
        client.train({"steps": 300 + 10 * k + n, "hidden": 3 + n, "data": "circles"})
        at += every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--share", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=600.0)
    parser.add_argument("--every", type=float, default=80.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        env = {"WEB_CONCURRENCY": "2", "TENSORVIZ_STATE_PATH": str(Path(state) / "state.sqlite3"),
               "TENSORVIZ_VARIANTS_DIR": str(Path(state) / "variants"), "TENSORVIZ_VARIANTS_KEPT": "12",
               "TENSORVIZ_VARIANTS_PER_CLIENT": "4", "TENSORVIZ_TRAINING_SHARE_SECONDS": str(args.share),
               "TENSORVIZ_TRAINING_SHARE_WINDOW": str(args.window)}
        with gunicorn("wsgi:app", env, ready_path="/api/models") as base:
            abuser, ordinary = Client(base, ABUSER), [Client(base, address) for address in ORDINARY]
            started = time.monotonic()
            until = started + args.seconds
            threads = [threading.Thread(target=abuse, args=(abuser, until))]
            threads += [threading.Thread(target=learn, args=(c, n, started, until, args.every))
                        for n, c in enumerate(ordinary)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            print(f"{args.seconds:g} s, one place to train, a share of {args.share:g} s per {args.window:g} s, "
                  f"VARIANTS_KEPT 12, VARIANTS_PER_CLIENT 4")
            print(f"abusive {ABUSER}: made {len(abuser.made)}, refused {abuser.refused}, kept at the end "
                  f"{abuser.kept()}")
            waits = [w for c in ordinary for w in c.waits]
            for client in ordinary:
                print(f"ordinary {client.address}: made {len(client.made)}, refused {client.refused}, kept at the "
                      f"end {client.kept()} of {len(client.made)}, waits to start "
                      f"{', '.join(f'{w:.1f}' for w in client.waits)} s")
            if waits:
                print(f"ordinary trainings' wait to start: median {statistics.median(waits):.1f} s, "
                      f"longest {max(waits):.1f} s")


if __name__ == "__main__":
    main()
