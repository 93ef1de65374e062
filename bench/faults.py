"""Fault drills against gunicorn on loopback: each fault must end in a clear error and self-recovery.

    python bench/faults.py

1. a recipe worker killed mid-run; 2. a recipe that hangs past its timeout; 3. a manifest corrupted on
disk; 4. Redis stopped while the app runs; 5. the web worker killed while it runs a verification; 6. a
manifest that comes to hold NaN, then the web worker killed (its replacement must boot); 7. a manifest
edited keeping its size and its mtime; 8. a verification asked while Redis is down; 9. a manifest whose
parents loop, added while the app runs; 10. a recipe.toml of wrong types and an unknown table; 11. a link to
/etc/passwd in a recipe folder; 12. a recipe that hangs at start (served from the boot: the other models' first
runs, and when it is suspended); 13. a What if? that a later part of the model cannot take; 14. another site's
page starting a run (a GET marked cross-site, a form POST); 15. a job polled while Redis is down; 16. another
model's run while a model hangs (its usual time, and the hanging model suspended, in words); 17. a forged history
entry (NaN, a reader's "passed" that would pass for the server's); 18. a retraining started while Redis is down;
The app serves a copy of the models plus a "slow" one whose what-if run and replay sleep for a minute, and a
"hangs" one whose lab.py never finishes importing, with a 3 s recipe timeout, a 3 s warm-up bound, a hang suspended
for 5 s and one web worker (so the drill can find its recipe process). Then, with the default timeouts on three web
workers behind one trusted proxy hop: 19. three retrainings started at once by three readers (one trains at a time
on the machine) and a stranger's cancel; 20. What if? on every recorded case of every model (each a 200, or a 400
that says why).
Prints, per drill, what the client saw and how long recovery took.
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import ROOT, Redis, gunicorn, request  # noqa: E402

RUN = json.dumps({"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]}).encode()
KILLED_RUN = {"input_ids": [1, 4, 5, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [3]}  # no case's
# The slow lab writes the request it runs when it begins (to a file beside the model folders, outside the catalog),
# so that a drill can kill its process in the drill's own run, not in its start nor in its recorded cases' keeping.
SLOW_LAB = ("import json\nimport pathlib\nimport time\n\n\ndef live_run(**request):\n"
            "    pathlib.Path({marker!r}).write_text(json.dumps(request))\n    time.sleep(60)\n")
HANGING_LAB = "import time\ntime.sleep(3600)  # importing this recipe never ends\n"
SLOW_REPLAY = ("\n\n_replay = replay\n\n\ndef replay(model=None):\n    import time\n    time.sleep(2)\n"
               "    return _replay(model)\n")


def model_tree(folder: Path) -> tuple[Path, Path]:
    manifests, recipes = folder / "manifests", folder / "recipes"
    shutil.copytree(ROOT / "manifests", manifests)
    shutil.copytree(ROOT / "recipes", recipes, ignore=shutil.ignore_patterns("__pycache__"))
    slow = json.loads((manifests / "bert" / "manifest.json").read_text()) | {"slug": "slow"}
    (manifests / "slow").mkdir()
    (manifests / "slow" / "manifest.json").write_text(json.dumps(slow))
    shutil.copytree(recipes / "bert", recipes / "slow")
    (recipes / "slow" / "lab.py").write_text(SLOW_LAB.format(marker=str(folder / "slow-running")))
    with (recipes / "slow" / "run.py").open("a") as run_py:
        run_py.write(SLOW_REPLAY)
    hangs = json.loads((manifests / "bert" / "manifest.json").read_text()) | {"slug": "hangs"}
    (manifests / "hangs").mkdir()
    (manifests / "hangs" / "manifest.json").write_text(json.dumps(hangs))
    shutil.copytree(recipes / "bert", recipes / "hangs")
    (recipes / "hangs" / "lab.py").write_text(HANGING_LAB)
    return manifests, recipes


def recipe_processes() -> list[int]:
    """The recipe workers of this machine's gunicorn under test: forks of a multiprocessing fork server (whose
    own command line they carry), not the server itself."""
    servers: dict[int, int] = {}  # pid -> parent pid, for every process that carries the fork server's line
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"multiprocessing.forkserver" in cmdline:
                servers[int(entry.name)] = parent
    return [pid for pid, parent in servers.items() if parent in servers]


def web_workers() -> list[int]:
    """The gunicorn web workers under test: gunicorn processes whose parent is a gunicorn process too."""
    def cmdline(pid: str) -> bytes:
        try:
            return (Path("/proc") / pid / "cmdline").read_bytes()
        except OSError:
            return b""

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and b"gunicorn" in cmdline(entry.name):
            try:
                parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
            if b"gunicorn" in cmdline(parent):
                found.append(int(entry.name))
    return found


def running(marker: Path, request: dict) -> bool:
    """Whether the slow lab's latest run is of this request."""
    try:
        ran = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return all(ran.get(key) == value for key, value in request.items())


def until(check, seconds: float = 60) -> float:
    """Seconds until check() is true."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if check():
            return time.monotonic() - started
        time.sleep(0.1)
    raise SystemExit(f"no recovery within {seconds} s: {check.__name__} {getattr(check, '__doc__', '') or ''}")


def message(body: bytes) -> str:
    return json.loads(body)["error"]["message"]


FRESH = iter(range(10**6))


def run_ok(base: str) -> bool:
    """A what-if run no cache has seen (so a recipe worker must answer it) succeeds."""
    n = next(FRESH)
    body = {"input_ids": [1, 4 + n % 12, 3, 2, 4 + n // 12 % 12, 2], "segment_ids": [0, 0, 0, 0, 1, 1],
            "mlm_positions": [2], "nsp_label": n // 144 % 2}
    return request("POST", base + "/api/models/bert/runs", json.dumps(body).encode())[0] == 200


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    manifests, recipes = model_tree(folder)
    env = {"WEB_CONCURRENCY": "1", "TENSORVIZ_MANIFESTS_DIR": str(manifests), "TENSORVIZ_RECIPES_DIR": str(recipes),
           "TENSORVIZ_RECIPE_TIMEOUT": "3", "TENSORVIZ_WARMUP_TIMEOUT": "3", "TENSORVIZ_CATALOG_RELOAD_SECONDS": "1",
           "TENSORVIZ_COMPUTE_BUDGET": '"1000000 per minute"', "TENSORVIZ_RECIPE_ASIDE_SECONDS": "5"}
    for name, redis in (("embedded (SQLite)", None), ("Redis", Redis())):
        settings = env | {"TENSORVIZ_STATE_PATH": str(folder / f"state-{redis is None}.sqlite3")}
        if redis is not None:
            redis.start()
            settings |= {"REDIS_URL": redis.url}
        try:
            booted = time.monotonic()
            with gunicorn("wsgi:app", settings) as base:
                drills(Rows(name), base, manifests, recipes, redis, booted)
        finally:
            if redis is not None:
                redis.stop()
    # The served defaults (a 120 s recipe timeout) on three web workers, behind one proxy hop the drills play.
    three = {key: value for key, value in env.items() if "TIMEOUT" not in key} | {
        "WEB_CONCURRENCY": "3", "TENSORVIZ_PROXY_FIX": "1", "TENSORVIZ_RETRAINING_COST": "1",
        "TENSORVIZ_STATE_PATH": str(folder / "state-three.sqlite3")}
    with gunicorn("wsgi:app", three) as base:
        rows = Rows("three web workers, the default timeouts")
        rows += retraining_drills(base)
        rows += every_case_changed(base)
    shutil.rmtree(folder)


class Rows(list):
    """The drills' rows, each printed as it comes (a drill that cannot recover stops the run: those before it show)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        print(f"[{name}]")
        print(f"{'drill':42} {'what the client saw':88} recovered after", flush=True)

    def append(self, row: tuple) -> None:
        drill, saw, seconds = row
        print(f"{drill:42} {saw[:88]:88} {seconds:6.1f} s", flush=True)
        super().append(row)

    def __iadd__(self, rows):
        for row in rows:
            self.append(row)
        return self


def drills(rows: Rows, base: str, manifests: Path, recipes: Path, redis: "Redis | None", booted: float) -> None:
    """Run every drill against one server; the Redis drill only when the app uses one."""
    until(lambda: run_ok(base), 180)  # the recipe worker is up
    first_run = time.monotonic() - booted
    until(lambda: request("GET", base + "/api/models/hangs")[0] == 404, 120)
    status, _, body = request("GET", base + "/api/models/hangs")
    rows.append((f"hangs at start (first run {first_run:.1f} s from boot)", f"{status} {message(body)}",
                 time.monotonic() - booted))  # recovered: suspended, this long after the boot

    # 1. kill the recipe worker while it runs the slow recipe
    answer: dict = {}
    slow = threading.Thread(target=lambda: answer.update(
        r=request("POST", base + "/api/models/slow/runs", json.dumps(KILLED_RUN).encode())))
    slow.start()
    until(lambda: running(manifests.parent / "slow-running", KILLED_RUN), 30)  # the drill's run has begun
    for pid in recipe_processes():
        os.kill(pid, signal.SIGKILL)
    slow.join()
    status, _, body = answer["r"]
    recovery = until(lambda: run_ok(base), 120)
    rows.append(("recipe worker killed mid-run", f"{status} {message(body)}", recovery))

    # 2. a recipe that hangs past the 3 s timeout
    started = time.monotonic()
    status, _, body = request("POST", base + "/api/models/slow/runs",
                              json.dumps(json.loads(RUN) | {"nsp_label": 1}).encode())
    waited = time.monotonic() - started
    recovery = until(lambda: run_ok(base), 120)
    rows.append((f"recipe hangs (answered after {waited:.1f} s)", f"{status} {message(body)}", recovery))
    until(lambda: request("GET", base + "/api/models/slow")[0] == 200, 30)  # suspended for 5 s, then back

    # 3. a manifest corrupted on disk, then mended
    path = manifests / "bert" / "manifest.json"
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    until(lambda: request("GET", base + "/api/models/bert")[0] == 404, 30)
    status, _, body = request("GET", base + "/api/models/bert")
    others = request("GET", base + "/api/models/slow")[0]
    path.write_bytes(good)
    recovery = until(lambda: request("GET", base + "/api/models/bert")[0] == 200, 30)
    rows.append(("manifest corrupted on disk", f"{status} {message(body)} (slow: {others})", recovery))

    # 4. Redis stopped while the app runs, then started again
    if redis is not None:
        redis.stop()
        outage = [request("GET", base + p)[0] for p in ("/", "/models/bert", "/api/models/bert")]
        status, headers, body = request("POST", base + "/api/models/bert/runs",
                                        json.dumps(json.loads(RUN) | {"mlm_positions": [1]}).encode())
        during = f"pages {outage}, a new run {status} Retry-After {headers.get('Retry-After')}"
        redis.start()

        def cached_again() -> bool:
            request("POST", base + "/api/models/bert/runs", RUN)
            _, _, again = request("POST", base + "/api/models/bert/runs", RUN)
            return json.loads(again).get("cached") is True

        rows.append(("Redis stopped, then restarted", during, until(cached_again, 60)))

    # 5. the web worker killed while it runs a verification: the job ends as an error, its recipe
    # worker with it, and the arbiter's new web worker answers the poll
    _, headers, body = request("POST", base + "/api/models/slow/verifications")
    job = json.loads(body)
    while job["state"] != "running":
        time.sleep(0.1)
        job = json.loads(request("GET", base + headers["Location"])[2])
    owner = web_workers()[0]  # one web worker: the job's owner (which no client is told)
    recipes_before = recipe_processes()
    os.kill(owner, signal.SIGKILL)
    killed = time.monotonic()
    gone = until(lambda: not set(recipes_before) & set(recipe_processes()), 30)

    def ended() -> bool:
        status, _, body = request("GET", base + headers["Location"])
        return status == 200 and json.loads(body)["state"] == "done"

    until(ended, 60)
    ended_after = time.monotonic() - killed
    report = json.loads(request("GET", base + headers["Location"])[2])["report"]
    rows.append(("web worker killed mid-verification", f"poll: job {report['status']} after {ended_after:.1f} s; "
                 f"its recipe worker gone after {gone:.1f} s", ended_after))

    # 6. a manifest that comes to hold NaN, then the web worker killed: its replacement boots (it renders every
    # model page first) and lists the manifest as unavailable
    path = manifests / "bert" / "manifest.json"
    good = path.read_bytes()
    path.write_bytes(good.replace(b'"value": ', b'"value": NaN, "was": ', 1))
    until(lambda: request("GET", base + "/api/models/bert")[0] == 404, 30)
    os.kill(web_workers()[0], signal.SIGKILL)
    killed = time.monotonic()
    until(lambda: request("GET", base + "/api/models", timeout=5)[0] == 200, 120)
    booted = time.monotonic() - killed
    listed = json.loads(request("GET", base + "/api/models")[2])["unavailable"]
    path.write_bytes(good)
    until(lambda: request("GET", base + "/api/models/bert")[0] == 200, 30)
    rows.append(("NaN in a manifest, web worker killed", f"new worker up after {booted:.1f} s; unavailable: "
                 f"{[(u['slug'], u['reason'][:40]) for u in listed]}", booted))

    # 7. an edit that keeps the size and restores the mtime
    etag = request("GET", base + "/api/models/bert")[1]["ETag"]
    stat = path.stat()
    digit = good.index(b'"value": ') + len(b'"value": ')
    path.write_bytes(good[:digit] + (b"7" if good[digit:digit + 1] != b"7" else b"8") + good[digit + 1:])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    noticed = until(lambda: request("GET", base + "/api/models/bert")[1].get("ETag") != etag, 30)
    path.write_bytes(good)
    until(lambda: request("GET", base + "/api/models/bert")[1].get("ETag") == etag, 30)
    rows.append(("same size, same mtime edit", "a new ETag for the new bytes", noticed))

    # 8. a verification asked while Redis is down: answered with its report, never a Location that 404s
    if redis is not None:
        redis.stop()
        started = time.monotonic()
        status, headers, body = request("POST", base + "/api/models/bert/verifications")
        waited = time.monotonic() - started
        redis.start()
        saw = f"{status} Retry-After {headers.get('Retry-After')}: {message(body)[:50]}"
        rows.append((f"verification while Redis is down ({waited:.1f} s)", saw,
                     until(lambda: request("POST", base + "/api/models/gpt/verifications")[0] in (200, 202), 30)))
    rows += hostile_files(base, manifests, recipes)
    rows += hostile_requests(base)
    rows += hang_drill(base)
    rows += history_drill(base)
    if redis is not None:  # 18. a retraining while Redis is down: refused, never admitted without a budget
        redis.stop()
        status, headers, body = request("POST", base + "/api/models/mlp/retrainings")
        redis.start()
        rows.append(("retraining while Redis is down", f"{status} Retry-After {headers.get('Retry-After')}: "
                     f"{message(body)[:60]}", until(lambda: run_ok(base), 30)))

    # 15. a job polled while Redis is down: a 503 with Retry-After, never a 404 for a job that exists
    if redis is not None:
        _, headers, body = request("POST", base + "/api/models/gpt/verifications")
        location = headers.get("Location") or f"/api/models/gpt/verifications/{json.loads(body).get('id', 'x')}"
        redis.stop()
        status, headers, body = request("GET", base + location)
        redis.start()
        rows.append(("job polled while Redis is down", f"{status} Retry-After {headers.get('Retry-After')} "
                     f"{message(body) if status >= 400 else ''}", until(lambda: request(
                         "GET", base + location)[0] in (200, 404), 30)))


def timed_get(base: str, path: str) -> tuple[int, float]:
    started = time.monotonic()
    status = request("GET", base + path)[0]
    return status, time.monotonic() - started


def hostile_files(base: str, manifests: Path, recipes: Path) -> list:
    """Drills 9-11: files that would once stop the server, added while it runs; each must be its own model's
    failure, the others answering as fast as before."""
    rows = []
    good = json.loads((manifests / "bert" / "manifest.json").read_text())

    def added(slug: str, manifest: dict | None = None, toml: str | None = None, link: str | None = None) -> tuple:
        shutil.copytree(recipes / "bert", recipes / slug)
        if toml is not None:
            (recipes / slug / "recipe.toml").write_text(toml)
        if link is not None:
            os.symlink(link, recipes / slug / "secret.txt")
        (manifests / slug).mkdir()
        (manifests / slug / "manifest.json").write_text(json.dumps((manifest or good) | {"slug": slug}))
        started = time.monotonic()
        until(lambda: any(u["slug"] == slug for u in json.loads(request("GET", base + "/api/models")[2])
                          ["unavailable"]), 30)
        listed = time.monotonic() - started
        status, _, body = request("GET", base + f"/api/models/{slug}")
        others = [timed_get(base, path) for path in ("/", "/models/gpt", "/api/models/gpt")]
        shutil.rmtree(manifests / slug)
        shutil.rmtree(recipes / slug)
        return (f"{status} {message(body)[:60]}; others {[s for s, _ in others]} in "
                f"{max(t for _, t in others) * 1000:.0f} ms", listed)

    looped = json.loads(json.dumps(good))
    first, second = (layer for layer in looped["layers"] if layer["kind"] == "module")
    first["parent"], second["parent"] = second["id"], first["id"]
    rows.append(("manifest whose parents loop", *added("loop", looped)))
    toml = (recipes / "bert" / "recipe.toml").read_text().replace("year = 2018", 'year = "1997"') + "\n[grahp]\n"
    rows.append(("recipe.toml: year as text, [grahp]", *added("typed", toml=toml)))
    rows.append(("link to /etc/passwd in a recipe", *added("linked", link="/etc/passwd")))
    return rows


def hostile_requests(base: str) -> list:
    """Drills 13-14: a change a later part cannot take, and another site's page starting runs."""
    change = json.dumps({"case": "zero", "interventions": [{"node": "decoder", "action": "scale", "factor": 3}]})
    status, _, body = request("POST", base + "/api/models/vae/interventions", change.encode())
    rows = [("What if? a later part cannot take", f"{status} {message(body)}", 0.0)]
    trace = "/api/models/bert/trace?input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position=2"
    crossed = request("GET", base + trace, headers={"Sec-Fetch-Site": "cross-site"})
    form = request("POST", base + "/api/models/bert/verifications", b"a=1",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    rows.append(("another site's page starts runs", f"GET {crossed[0]} {message(crossed[2])[:40]}; form POST "
                 f"{form[0]}", 0.0))
    return rows


def gpt_run(base: str) -> tuple[int, float]:
    """A gpt run no cache has seen, and how long it took."""
    body = json.dumps({"input_ids": [1 + next(FRESH) % 9, 2 + next(FRESH) % 7, 3, 4]}).encode()
    started = time.monotonic()
    return request("POST", base + "/api/models/gpt/runs", body)[0], time.monotonic() - started


def hang_drill(base: str) -> list:
    """Drill 16: gpt's runs while the slow model hangs (its run sleeps past the 3 s timeout): their usual time,
    and the slow model suspended with the reason, then served again."""
    usual = sorted(gpt_run(base)[1] for _ in range(3))[1]
    hung = [threading.Thread(target=request, args=("POST", base + "/api/models/slow/runs",
                                                   json.dumps(json.loads(RUN) | {"mlm_positions": [n]}).encode()))
            for n in (1, 3)]
    for thread in hung:
        thread.start()
    time.sleep(0.5)
    status, during = gpt_run(base)
    for thread in hung:
        thread.join()
    aside, headers, body = request("GET", base + "/api/models/slow")
    back = until(lambda: request("GET", base + "/api/models/slow")[0] == 200, 30)
    return [(f"gpt while a model hangs ({usual:.2f} s usually)", f"gpt {status} in {during:.2f} s; slow then {aside} "
             f"Retry-After {headers.get('Retry-After')}: {message(body)[:40]}", back)]


def history_drill(base: str) -> list:
    """Drill 17: a history entry with NaN, and a reader's "passed" with the server's digest: a 400, and a claim
    marked as the reader's."""
    path = base + "/api/models/mlp/verifications/history"
    entry = {"kind": "verification", "status": "passed", "revision": "1", "largest_deviation": 0.0, "values": 12,
             "values_failed": 0, "digest": "0" * 64,
             "environment": {"python": "3.11", "torch": "2.5", "numpy": "2", "os": "Linux", "cpu": "forged",
                             "vector_extensions": ["avx2"], "cpu_capability": "AVX2", "torch_threads": 1,
                             "device": "cpu"}}
    nan = request("POST", path, json.dumps(entry | {"largest_deviation": "NaN"}).encode().replace(b'"NaN"', b"NaN"))
    kept = request("POST", path, json.dumps(entry).encode())
    shown = json.loads(kept[2]).get("reported_by") if kept[0] == 201 else message(kept[2])[:40]
    return [("forged history entries", f"NaN {nan[0]}; a reader's 'passed' {kept[0]}, kept as reported_by={shown}",
             0.0)]


def every_case_changed(base: str) -> list:
    """Drill 19: What if? (the options, then zeroing the first node that can be) on every recorded case of every
    model: each answers 200, or a 400 that says why."""
    seen: dict[int, int] = {}
    slowest = (0.0, "")
    for model in json.loads(request("GET", base + "/api/models")[2])["models"]:
        slug = model["slug"]
        if slug in ("slow", "hangs"):
            continue
        for case in json.loads(request("GET", base + f"/api/models/{slug}")[2])["experiment"]["cases"]:
            started = time.monotonic()
            body = json.dumps({"case": case["id"]}).encode()
            status, _, options = request("POST", base + f"/api/models/{slug}/interventions/options", body, timeout=300)
            nodes = [n for n, o in json.loads(options)["nodes"].items() if "zero" in o["actions"]] \
                if status == 200 else []
            if nodes:  # (a case whose run calls no module, the DDPM's forward chain, offers none)
                change = {"case": case["id"], "interventions": [{"node": nodes[0], "action": "zero"}]}
                status = request("POST", base + f"/api/models/{slug}/interventions", json.dumps(change).encode(),
                                 timeout=300)[0]
            seen[status] = seen.get(status, 0) + 1
            slowest = max(slowest, (time.monotonic() - started, f"{slug} {case['id']}"))
    return [("What if? on every recorded case", f"statuses {seen}; slowest {slowest[1]} in {slowest[0]:.1f} s",
             0.0)]


def retraining_drills(base: str) -> list:
    """Drill 20: three readers (X-Forwarded-For, one proxy hop trusted) start three retrainings at once through three
    web workers: one trains at a time on the machine; a stranger's cancel is refused, the starter's token cancels."""
    def start(slug: str, reader: str, into: dict) -> None:
        into[slug] = request("POST", base + f"/api/models/{slug}/retrainings", headers={"X-Forwarded-For": reader})

    started: dict = {}
    threads = [threading.Thread(target=start, args=(slug, f"192.0.2.{n}", started))
               for n, slug in enumerate(("gcn", "mlp", "lenet"), start=1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    jobs = {slug: json.loads(body) for slug, (_, _, body) in started.items()}
    most, began = 0, time.monotonic()
    while time.monotonic() - began < 600:
        states = [json.loads(request("GET", base + job["location"])[2]) for job in jobs.values()]
        most = max(most, sum(job["state"] == "running" for job in states))
        if all(job["state"] == "done" for job in states):
            break
        time.sleep(0.2)
    ended = [job["report"]["status"] for job in states]
    rows = [("three retrainings at once, three readers", f"{[s for s, _, _ in started.values()]}; at most {most} "
             f"training at once; ended {ended}", time.monotonic() - began)]
    status, _, body = request("POST", base + "/api/models/resnet/retrainings", headers={"X-Forwarded-For": "192.0.2.4"})
    job = json.loads(body)
    stranger = request("DELETE", base + job["location"], headers={"X-Forwarded-For": "192.0.2.5"})
    starter = request("DELETE", base + job["location"], headers={"X-Forwarded-For": "192.0.2.4",
                                                                 "Authorization": f"Bearer {job['cancel_token']}"})
    until(lambda: json.loads(request("GET", base + job["location"])[2])["state"] == "done", 60)
    rows.append(("a stranger cancels a retraining", f"stranger {stranger[0]}: {message(stranger[2])[:45]}; "
                 f"starter {starter[0]}", 0.0))
    return rows


if __name__ == "__main__":
    main()
