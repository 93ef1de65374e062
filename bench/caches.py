"""What each in-process cache layer buys (app/domain/caches.py): the same requests with every layer on, and with one
layer off at a time, side by side in one run.

    python bench/caches.py [--repeat N] [--rounds R]

This process plays a web worker: it creates one app per arrangement and calls it through Flask's WSGI test client
(no network, no proxy), so a figure is the app's own time. A layer is turned off by its setting where it has one
(`RESPONSE_CACHE_BYTES`, `COMPRESS_CACHE_BYTES`) and otherwise by making it keep nothing (its size 0). Every app is
made and warmed first; then the arrangements are measured in turn, `--rounds` times `--repeat` requests of each
kind, and the medians are compared with those of every layer on, measured in the same run. The `runs` layer (a
recipe process's plain runs) is measured by bench/whatif.py, `unwritten` keeps what an outage would lose and
is no speed layer, and `proxy` (nginx) by bench/load.py's production column.
"""

import argparse
import dataclasses
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.domain import caches  # noqa: E402
from app.services.parts import parts  # noqa: E402

BROWSER = {"Accept-Encoding": "br, gzip"}
REQUESTS = {  # what a reader's browser and a script ask most, each answered from the layers in front of Flask
    "model page (plain GET)": ("GET", "/models/gpt"),
    "model page at a tour step (passes the response layer)": ("GET", "/models/gpt?step=3"),
    "manifest (plain GET)": ("GET", "/api/models/gpt"),
    "catalog page (plain GET)": ("GET", "/"),
    "a kept verification report (POST)": ("POST", "/api/models/gpt/verifications"),
}
# Each arrangement: the settings it changes and the layers it empties.
ARRANGEMENTS = {
    "every layer on": ({}, ()),
    "responses off": ({"RESPONSE_CACHE_BYTES": 0}, ()),
    "pages off": ({}, ("pages",)),
    # The rendered pages kept in the shared store too (the answers layer): a page then renders every time.
    "pages, answers off": ({"CACHE_TYPE": "NullCache"}, ("pages",)),
    "compressed off": ({"COMPRESS_CACHE_BYTES": 0}, ()),
}


def app_for(settings: dict, emptied: tuple[str, ...]):
    """An app whose listed layers keep nothing: their size made 0 while the app is made and used."""
    for name in emptied:
        caches.LAYERS[name] = dataclasses.replace(caches.LAYERS[name], size=0)
    return create_app({"TESTING": False, "STATE_PATH": None, "COMPUTE_BUDGET": "100000 per minute", **settings})


def asked(app, gets_only: bool) -> dict[str, tuple[str, str]]:
    """The requests this arrangement is measured on. Without the answers layer a report is never kept: each POST
    would run the recipe again, so it is left out there."""
    return {name: (method, path) for name, (method, path) in REQUESTS.items() if method == "GET" or not gets_only}


def warm(app, requests: dict[str, tuple[str, str]]) -> None:
    """Each request once (the first verification runs the recipe), after the recipe processes have started: their
    torch import would otherwise share the cores with what is measured."""
    pool = parts(app).pool
    while pool.warming():
        time.sleep(0.1)
    client = app.test_client()
    for method, path in requests.values():
        answer = client.open(path, method=method, headers=BROWSER)
        while answer.status_code == 202:
            time.sleep(0.2)
            answer = client.open(path, method=method, headers=BROWSER)
        assert answer.status_code == 200, (path, answer.status_code)


def measure(app, requests: dict[str, tuple[str, str]], repeat: int, into: dict[str, list[float]]) -> None:
    client = app.test_client()
    for name, (method, path) in requests.items():
        for _ in range(repeat):
            started = time.perf_counter()
            answer = client.open(path, method=method, headers=BROWSER)
            into.setdefault(name, []).append(time.perf_counter() - started)
            assert answer.status_code == 200, (path, answer.status_code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=100, help="requests of each kind per round")
    parser.add_argument("--rounds", type=int, default=3, help="the arrangements are measured in turn, this often")
    args = parser.parse_args()
    logging.getLogger("app").setLevel(logging.ERROR)
    original = dict(caches.LAYERS)
    apps, requests = {}, {}
    try:
        for arrangement, (settings, emptied) in ARRANGEMENTS.items():
            apps[arrangement] = app_for(settings, emptied)
            requests[arrangement] = asked(apps[arrangement], settings.get("CACHE_TYPE") == "NullCache")
            warm(apps[arrangement], requests[arrangement])  # its emptied layers are made now, empty they stay
            caches.LAYERS.update(original)
        times: dict[str, dict[str, list[float]]] = {arrangement: {} for arrangement in ARRANGEMENTS}
        for _ in range(args.rounds):
            for arrangement, app in apps.items():
                measure(app, requests[arrangement], args.repeat, times[arrangement])
    finally:
        caches.LAYERS.update(original)
        for app in apps.values():
            parts(app).pool.shutdown()
    rows = {a: {name: statistics.median(found) for name, found in t.items()} for a, t in times.items()}
    base = rows["every layer on"]
    width = max(map(len, REQUESTS))
    print(f"{'median ms (x every layer on)':{width}}  " + "  ".join(f"{a:>18}" for a in ARRANGEMENTS))
    for request in REQUESTS:
        cells = [f"{rows[a][request] * 1000:7.3f} ({rows[a][request] / base[request]:5.2f}x)" if request in rows[a]
                 else "-" for a in ARRANGEMENTS]
        print(f"{request:{width}}  " + "  ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
