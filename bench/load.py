"""Throughput and latency under gunicorn, beside a minimal Flask app answering the same bytes.

    python bench/load.py [--seconds 5] [--connections 16]

Both apps run under the same gunicorn.conf.py on loopback; wrk (Debian's) drives each endpoint in turn:
GET /api/models/bert, GET /models/bert and a cached POST /api/models/bert/verifications. TensorViz runs
with a real Redis (started here) so that every gunicorn worker shares the one cached report. Prints
requests/s, p50 and p99 latency, errors, and TensorViz's overhead as a ratio to the baseline.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import Redis, gunicorn, request  # noqa: E402

ENDPOINTS = [("GET", "/api/models/bert"), ("GET", "/models/bert"), ("POST", "/api/models/bert/verifications")]
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(method: str, url: str, seconds: int, connections: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(f'wrk.method = "{method}"\n')
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
    """What TensorViz answers, for the baseline to answer too; waits until the report is cached."""
    (folder / "manifest.json").write_bytes(request("GET", base + "/api/models/bert")[2])
    (folder / "page.html").write_bytes(request("GET", base + "/models/bert")[2])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status, _, body = request("POST", base + "/api/models/bert/verifications")
        if status == 200 and json.loads(body).get("cached"):
            (folder / "report.json").write_bytes(body)
            return
        time.sleep(0.5)
    raise SystemExit("the verification never came back cached")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is needed: scripts/install-test-packages")
    results: dict[str, dict] = {}
    folder = Path(tempfile.mkdtemp())
    env = {"TENSORVIZ_RATELIMIT_POSTS": '"1000000 per minute"'}
    with Redis() as redis, gunicorn("wsgi:app", env | {"REDIS_URL": redis.url}) as base:
        capture_bytes(base, folder)
        for method, path in ENDPOINTS:
            results[f"tensorviz {method} {path}"] = wrk(method, base + path, args.seconds, args.connections)
    with gunicorn("minimal_app:app", {"BENCH_BYTES_DIR": str(folder), "PYTHONPATH": "bench"},
                  ready_path="/api/models/bert") as base:
        for method, path in ENDPOINTS:
            results[f"baseline {method} {path}"] = wrk(method, base + path, args.seconds, args.connections)
    shutil.rmtree(folder)

    print(f"wrk -t2 -c{args.connections} -d{args.seconds}s against gunicorn (gunicorn.conf.py) on loopback")
    print(f"{'endpoint':44}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'req/s vs baseline':>20}")
    for method, path in ENDPOINTS:
        ours, base = results[f"tensorviz {method} {path}"], results[f"baseline {method} {path}"]
        for name, r in (("tensorviz", ours), ("baseline", base)):
            print(f"{name + ' ' + method + ' ' + path:44}{r['rps']:9.0f}{r['p50']:9.2f}{r['p99']:9.2f}{r['errors']:8d}"
                  + (f"{ours['rps'] / base['rps']:19.2f}x" if name == "tensorviz" else ""))


if __name__ == "__main__":
    main()
