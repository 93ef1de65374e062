"""What the browser tests do again and again on a page: await the graph, the lab and the end of an animation, run
axe-core, measure the text as drawn, read the graph's shades and draw on a lab's grid."""

from playwright.sync_api import expect

from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT


def graph_ready(page) -> None:
    """The graph is drawn, and so is its first picture of an input (which lays the nodes out again, taller), where
    the page has one to draw: a recorded case, or the lab's first run."""
    expect(page.locator("#graph-stage svg .g-node").first).to_be_visible()
    stage = page.locator("#graph-stage")
    for waited in range(600):
        state = stage.get_attribute("data-picture")
        if state in ("drawn", "failed") or (state == "waiting" and waited >= 100):
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"the graph's picture was still {state!r} after 30 s")


def settled(page) -> None:
    """Wait until the graph's pan and zoom transition (and any other animation) has finished (polled: the page's
    CSP forbids the eval that wait_for_function needs)."""
    for _ in range(250):
        if page.evaluate("document.getAnimations().length") == 0:
            return
        page.wait_for_timeout(20)
    raise AssertionError("the page kept animating for 5 s")


def choose_node(page, node: str) -> None:
    """Choose a graph node with the keyboard, wherever the view is: focused, then Enter (its details open)."""
    page.locator(f'#graph-stage .g-node[data-id="{node}"]').focus()
    page.keyboard.press("Enter")


def lab_ready(page) -> None:
    expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case", timeout=120_000)


def grid_cell(page, row: int, col: int):
    return page.locator(f'#draw-grid [data-row="{row}"][data-col="{col}"]')


def stroke(page, col: int, first: int, last: int) -> None:
    """A vertical stroke down one column, drawn with the real mouse: press on one cell, drag over the others to
    the last, release."""
    page.locator("#draw-grid").scroll_into_view_if_needed()
    start, end = grid_cell(page, first, col).bounding_box(), grid_cell(page, last, col).bounding_box()
    x = start["x"] + start["width"] / 2
    page.mouse.move(x, start["y"] + 4)
    page.mouse.down()
    page.mouse.move(x, end["y"] + end["height"] - 4, steps=12)
    page.mouse.up()


def lab_kind(slug: str) -> str | None:
    return read_metadata(PROJECT_ROOT / "recipes" / slug).get("lab", {}).get("kind")


AXE = PROJECT_ROOT / "tests" / "vendor" / "axe.min.js"  # axe-core 4.14.1 from the npm registry (MPL-2.0)


def axe_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it stands, one line each."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))  # the page's CSP forbids this; the test's context bypasses it
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes'][:3]]}"
            for v in result["violations"] if v["impact"] in ("serious", "critical")]


# Text drawn under 12 px, as the reader sees it: an SVG's text scaled by how its viewBox is drawn. The zoomable
# graph is left out: its reader sets its scale.
SMALL_TEXT = """() => [...document.querySelectorAll("body *")].filter((node) => !node.closest(".graph-stage")
    && node.getClientRects().length && [...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim()))
  .map((node) => {
    let size = parseFloat(getComputedStyle(node).fontSize);
    const svg = node.closest("svg");
    const box = svg?.viewBox.baseVal;
    if (box?.width) size *= svg.getBoundingClientRect().width / box.width;
    return [size, `${node.tagName} “${node.textContent.trim().slice(0, 24)}”`];
  }).filter(([size]) => size < 11.95).map(([size, what]) => `${what} at ${size.toFixed(1)} px`).slice(0, 5)"""


def small_text(page) -> list[str]:
    """Visible text under 12 px, the first five."""
    return page.evaluate(SMALL_TEXT)


def smallest_graph_label(page) -> float:
    """The smallest size, in px on the screen, of a graph label in the stage's view (Infinity for none)."""
    return page.evaluate("""() => {
        const stage = document.getElementById("graph-stage").getBoundingClientRect();
        const seen = [...document.querySelectorAll("#graph-stage .g-node text")].filter((text) => {
            const box = text.getBoundingClientRect();
            return box.width && box.right > stage.left && box.left < stage.right && box.bottom > stage.top
                && box.top < stage.bottom;
        });
        return Math.min(...seen.map((text) => parseFloat(getComputedStyle(text).fontSize) * text.getScreenCTM().a));
    }""")


def effects(page) -> dict[str, float]:
    """Each graph node's shade, as the page wrote it: how much its output moved."""
    return {id_: float(v) for id_, v in page.eval_on_selector_all(
        "#graph-stage .g-node[data-effect]", "ns => ns.map((n) => [n.dataset.id, n.dataset.effect])")}

