"""The graph at scale: a nanoGPT-style model recorded, stored and drawn at about 100, 1,000 and 10,000 nodes.

    python bench/graph.py [--sizes 100 1000 10000] [--repeat 3]

For each size it copies bench/recipes/deep-gpt with as many blocks as give about that many graph nodes,
records it with the project's recorder (`flask record`, in a recipe worker), and prints side by side: the
recording time, the stored bytes (manifest, graph file, snapshot), what the page reads (graph.json) and
bytes per node; then, in headless
Chromium against the app on loopback, the time from navigation to the drawn graph, the time to open and to
close a module (median and worst of every toggle made), the time to open every module, and frames per
second while a drag pans the graph with every module open. The smallest size is the baseline of the ratios.
Goals (issue: the graph at any size): recording under a minute at 10,000 nodes, storage linear in the nodes,
the graph within 1.5 s, a toggle within 250 ms, panning at 30 frames per second or more.
"""

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.domain.catalog import graph_document  # noqa: E402
from app.domain.graphlayout import drawing_document  # noqa: E402
from app.services.parts import parts  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
RECIPE = ROOT / "bench" / "recipes" / "deep-gpt"
NODES_OUTSIDE_BLOCKS = 9  # input, arange, wte, wpe, add, h, ln_f, lm_head, output
NODES_PER_BLOCK = 28
TOGGLE = """async (id) => {
  const button = document.querySelector(`#module-toggles button[data-module="${CSS.escape(id)}"]`)
    || document.querySelector(`[data-open-all="${id}"]`);
  const start = performance.now();
  button.click();
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));  // drawn and painted
  return performance.now() - start;
}"""
COUNT_FRAMES = """() => {
  window.benchFrames = { count: 0, start: performance.now(), on: true };
  const tick = () => { if (!window.benchFrames.on) return; window.benchFrames.count++; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
}"""
STOP_FRAMES = """() => {
  window.benchFrames.on = false;
  return window.benchFrames.count / ((performance.now() - window.benchFrames.start) / 1000);
}"""


def make_recipe(recipes: Path, target: int) -> str:
    blocks = max(1, round((target - NODES_OUTSIDE_BLOCKS) / NODES_PER_BLOCK))
    slug = f"deep-gpt-{target}"
    shutil.copytree(RECIPE, recipes / slug, ignore=shutil.ignore_patterns("__pycache__"))
    model_py = recipes / slug / "model.py"
    model_py.write_text(model_py.read_text().replace("N_LAYER = 333", f"N_LAYER = {blocks}"))
    return slug


def record(app, slug: str) -> float:
    started = time.perf_counter()
    result = app.test_cli_runner().invoke(args=["record", slug])
    if result.exit_code != 0:
        raise SystemExit(f"recording {slug} failed: {result.output}")
    return time.perf_counter() - started


def stored(manifests: Path, slug: str) -> dict:
    folder = manifests / slug
    manifest = json.loads((folder / "manifest.json").read_text())
    nodes = len(manifest["layers"])
    blocks = (nodes - NODES_OUTSIDE_BLOCKS) // NODES_PER_BLOCK
    return {"nodes": nodes, "modules": sum(layer["kind"] == "module" for layer in manifest["layers"]),
            "manifest": (folder / "manifest.json").stat().st_size,
            "preview": (folder / "preview.svg").stat().st_size,
            "graph file": len(graph_document(manifest)), "drawing": len(drawing_document(manifest)),
            "h.mid": f"h.{blocks // 2}"}


def browse(browser, base: str, slug: str, figures: dict, repeat: int) -> dict:
    shown, toggles = [], []
    for _ in range(repeat):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(f"{base}/models/{slug}", wait_until="commit")
        page.wait_for_selector("#graph-stage svg .g-node")
        shown.append(page.evaluate("performance.now()"))
        for module in ("h", "h.0", "h.0", figures["h.mid"], figures["h.mid"], "h"):
            toggles.append(page.evaluate(TOGGLE, module))
        context.close()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/models/{slug}")
    page.wait_for_selector("#graph-stage svg .g-node")
    open_all = page.evaluate(TOGGLE, "true")
    drawn = page.locator("#graph-stage .g-node").count()
    box = page.locator("#graph-stage").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] - 40
    page.evaluate(COUNT_FRAMES)
    page.mouse.move(x, y)
    page.mouse.down()
    for i in range(1, 241):  # upwards, so the view walks down the graph past what was drawn at first
        page.mouse.move(x + (i % 20 - 10) * 3, y - (i % 60) * 8)
        if i % 60 == 0:
            page.mouse.up()
            page.mouse.move(x, y)
            page.mouse.down()
    page.mouse.up()
    fps = page.evaluate(STOP_FRAMES)
    context.close()
    return {"shown": statistics.median(shown), "toggle median": statistics.median(toggles),
            "toggle worst": max(toggles), "open all": open_all, "drawn": drawn, "fps": fps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    work = Path(tempfile.mkdtemp(prefix="tensorviz-graph-bench-"))
    recipes, manifests = work / "recipes", work / "manifests"
    recipes.mkdir()
    manifests.mkdir()
    app = create_app({"TESTING": False, "RECIPES_DIR": str(recipes), "MANIFESTS_DIR": str(manifests),
                      "RECIPE_TIMEOUT": 600.0, "RESPONSE_CACHE_BYTES": 0})
    rows = {}
    try:
        for size in args.sizes:
            slug = make_recipe(recipes, size)
            seconds = record(app, slug)
            rows[size] = {"slug": slug, "record s": seconds} | stored(manifests, slug)
        server = make_server("127.0.0.1", 0, create_app({"TESTING": False, "RECIPES_DIR": str(recipes),
                                                         "MANIFESTS_DIR": str(manifests)}), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for size in args.sizes:
                browse(browser, base, rows[size]["slug"], rows[size], 1)  # warm the server's caches
                rows[size] |= browse(browser, base, rows[size]["slug"], rows[size], args.repeat)
            browser.close()
        server.shutdown()
    finally:
        parts(app).pool.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    report(rows, args.sizes)


def report(rows: dict, sizes: list[int]) -> None:
    base = rows[sizes[0]]

    def with_ratio(r: dict, value, of) -> str:
        return f"{value(r):,.0f} ({value(r) / value(base):.2f}x)" if of else f"{value(r):,.0f}"

    lines = [
        ("graph nodes (modules)", lambda r: f"{r['nodes']:,} ({r['modules']:,})"),
        ("record (s)", lambda r: f"{r['record s']:.1f}"),
        ("manifest.json (bytes)", lambda r: f"{r['manifest']:,}"),
        ("  per node", lambda r: with_ratio(r, lambda x: x["manifest"] / x["nodes"], True)),
        ("graph file, the recorded download (bytes)", lambda r: f"{r['graph file']:,}"),
        ("graph.json, what the page reads (bytes)", lambda r: f"{r['drawing']:,}"),
        ("  per node", lambda r: with_ratio(r, lambda x: x["drawing"] / x["nodes"], True)),
        ("preview.svg (bytes)", lambda r: f"{r['preview']:,}"),
        ("graph drawn after navigation (ms)", lambda r: with_ratio(r, lambda x: x["shown"], True)),
        ("open or close a module, median (ms)", lambda r: with_ratio(r, lambda x: x["toggle median"], True)),
        ("open or close a module, worst (ms)", lambda r: with_ratio(r, lambda x: x["toggle worst"], False)),
        ("open every module (ms)", lambda r: with_ratio(r, lambda x: x["open all"], False)),
        ("  boxes in the page then", lambda r: f"{r['drawn']:,}"),
        ("panning, all open (frames/s)", lambda r: with_ratio(r, lambda x: x["fps"], True)),
    ]
    width = max(len(name) for name, _ in lines)
    print(f"{'':{width}}  " + "  ".join(f"{'~' + format(s, ','):>18}" for s in sizes))
    for name, cell in lines:
        print(f"{name:{width}}  " + "  ".join(f"{cell(rows[s]):>18}" for s in sizes))


if __name__ == "__main__":
    main()
