"""The architecture graph in a real browser: fitting and first view, open modules, the keyboard walk, touch and drag,
and the view kept in the URL."""

import json
import math
import re
import urllib.request
from urllib.parse import unquote

import pytest
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT

from .browsing import DESKTOP, PHONE
from .conftest import RECORDED_LAB_SLUGS, eventually
from .page_checks import choose_node, graph_ready, settled, smallest_graph_label

pytestmark = pytest.mark.browser


def test_a_node_tapped_at_375px_shows_its_details_in_view(watched):
    page = watched("/models/bert?step=bidirectional", PHONE, has_touch=True, is_mobile=True, reduced_motion="reduce")
    graph_ready(page)
    page.locator('#graph-stage .g-node[data-id="encoder.attention.softmax"]').tap()
    details = page.locator("#node-details")
    expect(details.locator("h3")).to_have_text("encoder.attention.softmax")
    box = details.bounding_box()
    assert box["y"] < PHONE["height"] and box["y"] + min(box["height"], 200) > 0  # its top part is on screen
    assert box["y"] >= -1


def test_the_graph_is_one_tab_stop_and_arrow_keys_walk_it_in_view(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    expect(page.locator('#graph-stage .g-node[tabindex="0"]')).to_have_count(1)
    page.locator("[data-export-graph]").focus()
    tabs = 0
    while not page.evaluate("document.activeElement.classList.contains('g-node')") and tabs < 100:
        page.keyboard.press("Tab")  # past the module toggles' row to the graph
        tabs += 1
    assert tabs == 1 + page.locator("#module-toggles button").count()
    first = page.evaluate("document.activeElement.dataset.id")
    stage = page.locator("#graph-stage").bounding_box()
    seen, tops = [first], []
    nodes = page.locator("#graph-stage .g-node").count()
    assert nodes >= 12
    for _ in range(nodes - 1):
        page.keyboard.press("ArrowDown")
        focused = page.locator(".g-node:focus")
        seen.append(focused.get_attribute("data-id"))
        settled(page)
        box = focused.bounding_box()
        tops.append(page.evaluate("(id) => { const n = document.querySelector(`.g-node[data-id='${id}'] rect`); "
                                  "return Number(n.getAttribute('y')); }", seen[-1]))
        assert stage["y"] <= box["y"] and box["y"] + box["height"] <= stage["y"] + stage["height"]  # in view
        assert stage["x"] <= box["x"] and box["x"] + box["width"] <= stage["x"] + stage["width"]
    assert len(set(seen)) == len(seen) == nodes  # a new node each time, every node once
    assert tops == sorted(tops)  # in reading order, top to bottom
    expect(page.locator('#graph-stage .g-node[tabindex="0"]')).to_have_count(1)
    page.keyboard.press("Tab")  # one Tab leaves the graph
    assert not page.evaluate("document.activeElement.classList.contains('g-node')")


def in_stage(page) -> tuple[int, list[str]]:
    """How many graph nodes there are, and which of them lie (wholly) outside the stage."""
    stage = page.locator("#graph-stage").bounding_box()
    outside = []
    for node in page.locator("#graph-stage .g-node").all():
        box = node.bounding_box()
        if not (stage["x"] - 1 <= box["x"] and box["x"] + box["width"] <= stage["x"] + stage["width"] + 1
                and stage["y"] - 1 <= box["y"] and box["y"] + box["height"] <= stage["y"] + stage["height"] + 1):
            outside.append(node.get_attribute("data-id"))
    return page.locator("#graph-stage .g-node").count(), outside


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("path", ["/models/bert", "/models/bert-base"])
def test_fit_shows_every_node(watched, path, viewport):
    page = watched(path, viewport)
    graph_ready(page)
    if path.endswith("bert-base"):
        page.locator('#module-toggles button[data-module="layers"]').click()  # a tall graph: one layer open
        page.locator('#module-toggles button[data-module="layers.0"]').click()
    page.get_by_role("button", name="Fit").click()
    settled(page)
    count, outside = in_stage(page)
    assert count >= 15 and outside == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_first_view_shows_the_graphs_full_width_where_its_labels_stay_readable(watched, viewport):
    """A desktop's first view holds the graph's full width; a phone's, where that would shrink the labels under
    11 px, stays at a readable size (the tour's step in view) and pans from there."""
    page = watched("/models/bert", viewport)
    graph_ready(page)
    settled(page)
    stage = page.locator("#graph-stage").bounding_box()
    nodes = [node.bounding_box() for node in page.locator("#graph-stage .g-node").all()]
    inside = [stage["x"] - 1 <= box["x"] and box["x"] + box["width"] <= stage["x"] + stage["width"] + 1
              for box in nodes]
    if viewport is DESKTOP:
        assert all(inside)
    else:
        assert 11 <= smallest_graph_label(page) < math.inf and not all(inside)  # full width: 6 px labels


def nested(slug: str) -> bool:
    """Whether a model's graph has modules that hold others (the MLP's four layers hold nothing)."""
    layers = json.loads((PROJECT_ROOT / "manifests" / slug / "manifest.json").read_text())["layers"]
    parents = {layer.get("parent") for layer in layers}
    return sum(layer["kind"] == "module" and layer["id"] in parents for layer in layers) >= 2


@pytest.mark.parametrize("path", [f"/models/{slug}" for slug in RECORDED_LAB_SLUGS if nested(slug)])
def test_every_module_can_be_open_at_once_each_holding_its_contents_with_no_two_boxes_overlapping(
        watched, live_server, path):
    page = watched(path)
    graph_ready(page)
    toggles = page.locator("#module-toggles button")
    # Open each closed module by its own toggle (a module's toggle shows once its parent is open).
    for _ in range(50):
        closed = page.locator('#module-toggles button[aria-pressed="false"]')
        if not closed.count():
            break
        closed.first.click()
    modules = toggles.count()
    assert modules >= 2
    expect(page.locator('#module-toggles button[aria-pressed="true"]')).to_have_count(modules)
    expect(page.locator("#graph-stage .g-cluster")).to_have_count(modules)  # every module drawn open
    expect(page.locator("#graph-stage .g-node.is-module")).to_have_count(0)
    page.get_by_role("button", name="Fit").click()
    settled(page)
    assert in_stage(page)[1] == []
    page.get_by_role("button", name="Close all").click()
    expect(page.locator("#graph-stage .g-cluster")).to_have_count(0)
    expect(page.locator('#module-toggles button[aria-pressed="true"]')).to_have_count(0)
    page.get_by_role("button", name="Open all").click()
    expect(page.locator("#graph-stage .g-cluster")).to_have_count(modules)
    parents = {layer["id"]: layer["parent"] for layer in json.loads(
        urllib.request.urlopen(live_server + path + "/graph.json").read())["layers"]}
    boxes = {i: (cluster, x, y, w, h) for i, cluster, x, y, w, h in page.evaluate(BOXES)}
    assert len(boxes) == len(parents)  # every layer drawn: a node, or an open module's box
    for node, (_, x, y, w, h) in boxes.items():
        parent = parents[node]
        if parent:  # inside its module's box
            _, px, py, pw, ph = boxes[parent]
            assert px <= x and x + w <= px + pw and py <= y and y + h <= py + ph, (node, parent)
        for other, (_, ox, oy, ow, oh) in boxes.items():  # siblings never overlap
            if other != node and parents[other] == parent:
                assert x + w <= ox or ox + ow <= x or y + h <= oy or oy + oh <= y, (node, other)


def test_module_toggles_are_pressed_when_open(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    expect(page.locator('#graph-stage .g-node[data-id="h.1"]')).to_contain_text("transformer block")  # closed: its name
    toggle = page.locator('#module-toggles button[data-module="h.1"]')
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(toggle).to_have_text("▸ h.1")
    toggle.click()
    expect(page.locator('#module-toggles button[data-module="h.1"]')).to_have_attribute("aria-pressed", "true")
    expect(page.locator('#graph-stage .g-cluster[data-id="h.1"]')).to_have_count(1)
    pressed = page.locator('#module-toggles button[data-module="h.1"]')
    assert pressed.evaluate("(e) => getComputedStyle(e).backgroundColor") != toggle.evaluate(
        "() => getComputedStyle(document.querySelector('#module-toggles button[aria-pressed=\"false\"]'))"
        ".backgroundColor")


BOXES = """() => [...document.querySelectorAll('#graph-stage .g-node, #graph-stage .g-cluster')].map((g) => {
  const r = g.querySelector('rect');
  const size = ['x', 'y', 'width', 'height'].map((a) => Number(r.getAttribute(a)));
  return [g.dataset.id, g.classList.contains('g-cluster'), ...size];
})"""


@pytest.fixture(scope="module")
def large_graph(module_apps, tmp_path_factory):
    """A server of gpt2 recorded without any checkpoint: gpt2 small's twelve blocks, 357 nodes (the catalog's largest
    graph is smaller)."""
    import shutil

    from app.services.config import PROJECT_ROOT, TestConfig

    from .browsing import serving
    from .conftest import ModelTree

    root = tmp_path_factory.mktemp("large")
    (root / "tree").mkdir()
    tree = ModelTree(root / "tree")
    shutil.copytree(PROJECT_ROOT / "recipes" / "gpt2", tree.recipes / "gpt2",
                    ignore=shutil.ignore_patterns("__pycache__"))
    app = module_apps(type("Large", (TestConfig,), tree.config(CHECKPOINTS_DIR=str(root / "none"))))
    result = app.test_cli_runner().invoke(args=["record", "gpt2"])
    assert result.exit_code == 0, result.output
    with serving(app) as base:
        yield base


def test_a_large_open_graph_draws_what_is_near_the_view_and_the_keyboard_walks_all_of_it(browser, large_graph):
    from .browsing import Watched

    w = Watched(browser, large_graph, DESKTOP)
    page = w.page
    page.goto(large_graph + "/models/gpt2")  # gpt2 small's twelve blocks
    graph_ready(page)
    page.get_by_role("button", name="Open all").click()
    expect(page.locator("#graph-stage .g-cluster")).not_to_have_count(0)
    drawn = page.locator("#graph-stage .g-node").count()
    total = int(page.locator("#graph-stage svg").get_attribute("aria-label").split(", ")[1].split()[0])
    assert 0 < drawn < total and total > 300  # only what is near the view is in the page
    page.locator('#graph-stage .g-node[tabindex="0"]').focus()
    seen = []
    for _ in range(120):  # well past what was drawn at first
        page.keyboard.press("ArrowDown")
        seen.append(page.evaluate("document.activeElement.dataset.id"))
    assert None not in seen and len(set(seen)) == len(seen)  # the focus never fell out of the redrawn graph
    settled(page)
    stage = page.locator("#graph-stage").bounding_box()
    box = page.locator(".g-node:focus").bounding_box()
    assert stage["y"] <= box["y"] and box["y"] + box["height"] <= stage["y"] + stage["height"]
    w.close()


def test_a_tour_step_opens_what_it_talks_about(watched):
    page = watched("/models/bert-base")
    graph_ready(page)
    expect(page.locator('#graph-stage .g-node[data-id="layers"]')).to_have_count(1)  # closed at the start
    page.locator('[data-tour="next"]').click()  # "embed": embeddings
    page.locator('[data-tour="next"]').click()  # "attend": layers.0.attention, inside the closed layers.0
    expect(page.locator("#graph-stage .g-node.is-target")).to_have_attribute("data-id", "layers.0.attention")
    for module in ("layers", "layers.0"):
        toggle = page.locator(f'#module-toggles button[data-module="{module}"]')
        expect(toggle).to_have_attribute("aria-pressed", "true")
    page.locator('[data-tour="next"]').click()  # "ffn": layers.0.up
    expect(page.locator("#graph-stage .g-node.is-target")).to_have_attribute("data-id", "layers.0.up")


def test_an_input_node_says_what_the_recording_ran_with(watched):
    page = watched("/models/bert")
    graph_ready(page)
    choose_node(page, "input")
    details = page.locator("#node-details")
    expect(details).to_contain_text("shape=1,5,16")  # what the original capture's graph holds
    expect(details).to_contain_text("recorded with1,6 int64; 1,6 int64")  # what its cases ran on


def test_a_drag_from_a_node_pans_and_a_click_still_selects(watched):
    page = watched("/models/bert?step=bidirectional")
    graph_ready(page)
    settled(page)
    viewport = page.locator("#graph-stage .viewport")
    page.locator("#graph-stage").scroll_into_view_if_needed()  # below the lab, which the page leads with
    node = page.locator("#graph-stage .g-node.is-target")  # the tour's step: in the middle of the view
    box = node.bounding_box()
    before = viewport.get_attribute("transform")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 60, box["y"] + box["height"] / 2 + 40, steps=6)
    page.mouse.up()
    assert viewport.get_attribute("transform") != before  # the drag panned
    expect(page.locator("#node-details h3")).to_have_text("Node")  # and selected nothing
    node.click()
    expect(page.locator("#node-details h3")).to_have_text("encoder.attention.softmax")


def test_a_swipe_over_the_graph_pans_it_and_the_page_still_scrolls_past_it(browser, live_server):
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = context.new_page()
    page.goto(live_server + "/models/bert")
    graph_ready(page)
    settled(page)
    stage = page.locator("#graph-stage")
    assert stage.evaluate("(e) => getComputedStyle(e).touchAction") == "none"  # a swipe on it pans the graph
    stage.evaluate("(e) => e.scrollIntoView({ block: 'center' })")
    box = stage.bounding_box()
    assert box["height"] < PHONE["height"] * 0.75  # room above or below it to scroll the page by
    viewport = page.locator("#graph-stage .viewport")
    before = viewport.get_attribute("transform")
    cdp = context.new_cdp_session(page)
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for i in range(1, 8):
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y - 12 * i}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    expect(viewport).not_to_have_attribute("transform", before)
    scrolled = page.evaluate("window.scrollY")
    page.mouse.move(x, y)
    page.mouse.wheel(0, 300)  # a wheel over the graph scrolls the page, it is not trapped
    eventually(lambda: page.evaluate("window.scrollY"), lambda y: y > scrolled, seconds=5)
    context.close()


def test_graph_nodes_name_the_op_that_ran(watched):
    page = watched("/models/bert?step=bidirectional")
    graph_ready(page)
    expect(page.locator("#graph-stage")).not_to_contain_text("Python")
    node = page.locator('#graph-stage .g-node[data-id="python@encoder.attention#0"]')
    expect(node).to_contain_text("unflatten")
    node.click()
    expect(page.locator("#node-details")).to_contain_text("unflatten · transpose (query heads)")


def test_the_open_modules_and_the_selected_node_live_in_the_url(watched):
    """A link reproduces the graph's view: the modules open and the node whose details (and What if? module)
    are shown."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    page.locator('#module-toggles [data-module="h.1"]').click()
    expect(page.locator('#module-toggles [data-module="h.1"]')).to_have_attribute("aria-pressed", "true")
    choose_node(page, "h.1.mlp")
    expect(page.locator("#node-details-title")).to_have_text("h.1.mlp")
    params = dict(p.split("=", 1) for p in unquote(page.url.split("?", 1)[1]).split("&"))
    assert "h.1" in params["open"].split(",") and params["node"] == "h.1.mlp"
    page.goto(page.url)
    graph_ready(page)
    expect(page.locator("#node-details-title")).to_have_text("h.1.mlp")
    expect(page.locator("#whatif-node")).to_have_text("h.1.mlp")
    expect(page.locator('#module-toggles [data-module="h.1"]')).to_have_attribute("aria-pressed", "true")
    expect(page.locator('#graph-stage .g-node[data-id="h.1.mlp"]')).to_have_class(re.compile("is-selected"))
    page.locator('#module-toggles [data-module="h.1"]').click()  # closed again: the link says so
    expect(page.locator('#module-toggles [data-module="h.1"]')).to_have_attribute("aria-pressed", "false")
    assert "h.1" not in dict(p.split("=", 1) for p in unquote(page.url.split("?", 1)[1]).split("&"))["open"].split(",")

