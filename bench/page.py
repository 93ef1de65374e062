"""Weight and speed of the model page in headless Chromium, against a minimal page of the same site.

    python bench/page.py [--repeat N] [--heights]

Each load uses a fresh browser context (cold cache) against a server on loopback. It prints, as medians,
the bytes transferred (HTML, CSS, JS, data), the request count, the time to first contentful paint and
the time until the interactive graph is drawn; the baseline is the site's 404 page (one small HTML file
and the stylesheet) measured in the same run. `--heights` prints instead every model page's height as loaded
(the graph drawn, the lab ready, the network idle) at 1280 px and at 375 px, and where the lab starts,
against the 404 page's height at each width.
"""

import argparse
import statistics
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import create_app  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
MEASURE = """async () => {
  const paint = await new Promise((resolve) => {
    new PerformanceObserver((list) => {
      const entry = list.getEntriesByName("first-contentful-paint")[0];
      if (entry) resolve(entry);
    }).observe({ type: "paint", buffered: true });
    setTimeout(() => resolve(null), 5000);
  });
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  const byType = {};
  for (const r of resources) {
    const path = new URL(r.name).pathname;
    const ext = path.startsWith("/api/") ? "api json" : path.split(".").pop();
    byType[ext] = (byType[ext] || 0) + r.transferSize;
  }
  return {
    bytes: nav.transferSize + resources.reduce((sum, r) => sum + r.transferSize, 0),
    html: nav.transferSize, requests: 1 + resources.length, byType,
    fcp: paint ? paint.startTime : null,
  };
}"""


def load(browser, url: str, ready: str | None) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url, wait_until="load")
    ready_ms = None
    if ready:
        page.wait_for_selector(ready)
        ready_ms = page.evaluate("performance.now()")
        page.wait_for_load_state("networkidle")
    figures = page.evaluate(MEASURE) | {"ready_ms": ready_ms}
    context.close()
    return figures


WIDTHS = {"1280 px": {"width": 1280, "height": 900}, "375 px": {"width": 375, "height": 740}}


def height(browser, url: str, viewport: dict) -> tuple[int, int | None]:
    """The page's height and the lab's top (None without a lab), in px, as loaded."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.goto(url, wait_until="load")
    if page.locator("#graph-stage").count():
        page.wait_for_selector("#graph-stage svg .g-node")
    if page.locator("#lab").count():
        page.wait_for_selector("#lab[data-ready]")
    page.wait_for_load_state("networkidle")
    found = page.evaluate("""() => [document.documentElement.scrollHeight,
        document.getElementById("lab") ? Math.round(document.getElementById("lab").getBoundingClientRect().top
        + window.scrollY) : null]""")
    context.close()
    return found[0], found[1]


def heights(browser, base: str) -> None:
    models = sorted(p.name for p in (Path(__file__).resolve().parent.parent / "manifests").iterdir()
                    if (p / "manifest.json").is_file())
    print("page height as loaded, and where the lab starts (px)")
    print(f"{'page':16}" + "".join(f"{width + ' height':>16}{'lab at':>10}" for width in WIDTHS))
    for name, url in [*((slug, f"{base}/models/{slug}") for slug in models), ("404 page", f"{base}/models/nope")]:
        row = [height(browser, url, viewport) for viewport in WIDTHS.values()]
        print(f"{name:16}" + "".join(f"{tall:>16,}{'—' if lab is None else f'{lab:,}':>10}" for tall, lab in row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--heights", action="store_true", help="every model page's height at both widths instead")
    args = parser.parse_args()
    server = make_server("127.0.0.1", 0, create_app({"TESTING": False}), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    if args.heights:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            heights(browser, base)
            browser.close()
        server.shutdown()
        return
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        load(browser, f"{base}/models/bert", "#graph-stage svg .g-node")  # warm the server, not the browser
        runs = {"model page": [], "baseline (404 page)": []}
        for _ in range(args.repeat):
            runs["model page"].append(load(browser, f"{base}/models/bert", "#graph-stage svg .g-node"))
            runs["baseline (404 page)"].append(load(browser, f"{base}/models/nope", None))
        browser.close()
    server.shutdown()

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    model, baseline = "model page", "baseline (404 page)"
    print(f"headless Chromium, cold cache, {args.repeat} loads each (medians)")
    print(f"{'':22}{'transfer':>12}{'requests':>10}{'first paint':>14}{'graph drawn':>14}")
    for name in runs:
        ready = median(name, "ready_ms") if runs[name][0]["ready_ms"] is not None else None
        print(f"{name:22}{median(name, 'bytes') / 1024:9.1f} KiB{median(name, 'requests'):10.0f}"
              f"{median(name, 'fcp'):11.0f} ms" + (f"{ready:11.0f} ms" if ready else f"{'—':>14}"))
    print(f"{'ratio':22}{median(model, 'bytes') / median(baseline, 'bytes'):10.1f} x"
          f"{median(model, 'requests') / median(baseline, 'requests'):10.1f}"
          f"{median(model, 'fcp') / median(baseline, 'fcp'):12.1f} x")
    parts = runs[model][0]["byType"]
    print("model page by kind: " + ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sorted(parts.items())))


if __name__ == "__main__":
    main()
