"""Throughput and latency under gunicorn, beside a minimal Flask app answering the same bytes.

    python bench/load.py [--seconds 4] [--connections 16] [--rounds 3]

Every app runs under the same gunicorn.conf.py on loopback; wrk (Debian's) drives each endpoint in turn
with a browser's `Accept-Encoding: br, gzip`: GET /api/models/bert, GET /models/bert and a cached POST
/api/models/bert/verifications. TensorViz runs twice: with its embedded default (one SQLite file shared
by the gunicorn workers) and with a real Redis (started here). The baseline answers TensorViz's own
compressed bytes, read once at start. The three servers run side by side and are measured in turns,
endpoint by endpoint, `--rounds` times, so that the machine's drift falls on all of them alike. Prints
the median requests/s, p50 and p99 latency over the rounds, errors, and each TensorViz store's
throughput as a ratio to the baseline's.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import Redis, gunicorn, request  # noqa: E402

ENDPOINTS = [("GET", "/api/models/bert"), ("GET", "/models/bert"), ("POST", "/api/models/bert/verifications")]
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
ACCEPT = {"Accept-Encoding": "br, gzip"}


def wrk(method: str, url: str, seconds: int, connections: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(f'wrk.method = "{method}"\nwrk.headers["Accept-Encoding"] = "{ACCEPT["Accept-Encoding"]}"\n')
    done = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script.name, url],
                          capture_output=True, text=True, check=True)
    Path(script.name).unlink()
    out = done.stdout

    def latency(pct: str) -> float:
        value, unit = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * UNITS[unit]

    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50": latency("50"), "p99": latency("99"),
        "errors": (int(non_2xx.group(1)) if non_2xx else 0) + (sum(map(int, sockets.groups())) if sockets else 0),
    }


def capture_bytes(base: str, folder: Path) -> None:
    """What TensorViz answers a browser (compressed), for the baseline to answer too; waits until the
    report is cached."""
    def keep(name: str, method: str, path: str) -> bytes:
        status, headers, body = request(method, base + path, headers=ACCEPT)
        (folder / name).write_bytes(body)
        (folder / f"{name}.encoding").write_text(headers.get("Content-Encoding", ""))
        return body

    keep("manifest.json", "GET", "/api/models/bert")
    keep("page.html", "GET", "/models/bert")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status, _, body = request("POST", base + "/api/models/bert/verifications")
        if status == 200 and json.loads(body).get("cached"):
            keep("report.json", "POST", "/api/models/bert/verifications")
            return
        time.sleep(0.5)
    raise SystemExit("the verification never came back cached")


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is needed: scripts/install-test-packages")
    folder = Path(tempfile.mkdtemp())
    env = {"TENSORVIZ_COMPUTE_BUDGET": '"1000000 per minute"', "TENSORVIZ_STATE_PATH": str(folder / "state.sqlite3")}
    runs: dict[tuple[str, str], list[dict]] = {}
    with ExitStack() as stack:
        redis = stack.enter_context(Redis())
        servers = {"embedded": stack.enter_context(gunicorn("wsgi:app", env)),
                   "redis": stack.enter_context(gunicorn("wsgi:app", env | {"REDIS_URL": redis.url}))}
        capture_bytes(servers["embedded"], folder)
        capture_bytes(servers["redis"], folder)
        servers["baseline"] = stack.enter_context(gunicorn(
            "minimal_app:app", {"BENCH_BYTES_DIR": str(folder), "PYTHONPATH": "bench"}, ready_path="/api/models/bert"))
        for method, path in ENDPOINTS:
            for _ in range(args.rounds):
                for name, base in servers.items():
                    runs.setdefault((name, path), []).append(wrk(method, base + path, args.seconds, args.connections))
    shutil.rmtree(folder)

    results = {key: {k: median([r[k] for r in rs]) for k in ("rps", "p50", "p99")}
               | {"errors": sum(r["errors"] for r in rs)} for key, rs in runs.items()}
    print(f"wrk -t2 -c{args.connections} -d{args.seconds}s against gunicorn (gunicorn.conf.py) on loopback, "
          f"Accept-Encoding: {ACCEPT['Accept-Encoding']}; medians of {args.rounds} rounds taken in turns")
    print(f"{'endpoint':54}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'vs baseline':>13}")
    for method, path in ENDPOINTS:
        base = results[("baseline", path)]
        for name in ("embedded", "redis", "baseline"):
            r = results[(name, path)]
            ratio = f"{r['rps'] / base['rps']:12.2f}x" if name != "baseline" else ""
            print(f"{name + ' ' + method + ' ' + path:54}{r['rps']:9.0f}{r['p50']:9.2f}{r['p99']:9.2f}"
                  f"{r['errors']:8d}{ratio}")


if __name__ == "__main__":
    main()
