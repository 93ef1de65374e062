"""What a cached answer's write costs the shared store as it fills, beside a write that is not cached.

    python bench/store.py [--entries 0,2000,20000] [--repeat 300]

For each fill, a fresh SQLite store (the embedded default) is filled with that many cached 2 KB answers, then
times a 23 KB answer (a BERT verification report's size) written `--repeat` times, cached (counted against
STATE_MAX_BYTES, evicting what expired or passes the cap) and not (a job). The ratio of the two is the
eviction's share; before the running total, the cached write scanned every row and grew with the fill.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.services.state import SQLiteStore  # noqa: E402


def timed(store: SQLiteStore, value: dict, repeat: int, cached: bool) -> float:
    """The median time of one write, in ms, over 20 keys in turn (each write replaces one)."""
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        store.set(f"answer-{i % 20}", value, 3600, cached=cached)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", default="0,2000,20000")
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    value = {"report": "x" * 23_000}
    print(f"{'cached answers kept':>20} {'cached write ms':>16} {'job write ms':>13} {'ratio':>6}")
    for count in (int(n) for n in args.entries.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            store = SQLiteStore(str(Path(folder) / "state.sqlite3"), 256 * 2**20, 4 * 2**20)
            for i in range(count):
                store.set(f"fill-{i}", {"answer": "x" * 2_000}, 3600, cached=True)
            cached, plain = timed(store, value, args.repeat, True), timed(store, value, args.repeat, False)
            store.close()
        print(f"{count:>20} {cached:>16.3f} {plain:>13.3f} {cached / plain:>6.2f}")


if __name__ == "__main__":
    main()
