"""The graph as the picture of the lab's input, in a real browser: every node draws what it computed, every arrow
its tensor's shape, another input redraws it, and a selected node shows its output full size."""

import re

import pytest
from playwright.sync_api import expect

from .conftest import CATALOG_SLUGS, eventually
from .page_checks import axe_violations, choose_node, graph_ready

pytestmark = pytest.mark.browser

SHAPE = re.compile(r"^\d+(×\d+)*$|^a number$")


def input_picture(page) -> str:
    """The input node's drawing, as the page holds it (its images' data)."""
    return page.eval_on_selector_all('#graph-stage .g-node[data-id^="input"] image',
                                     "images => images.map((i) => i.getAttribute('href')).join('|')")


def test_the_graph_draws_the_labs_input_and_another_case_redraws_it(watched):
    page = watched("/models/lenet", bypass_csp=True)  # axe is added as a script
    graph_ready(page)
    stage = page.locator("#graph-stage")
    expect(stage).to_have_attribute("data-picture", "drawn")
    shapes = page.eval_on_selector_all("#graph-stage [data-shape]", "edges => edges.map((e) => e.dataset.shape)")
    assert len(shapes) >= 3 and all(SHAPE.match(s) for s in shapes), shapes
    assert {"8×8", "6×4×4", "64"} <= set(shapes)  # the digit, stage 1's pooled maps, the flattened vector
    assert page.locator("#graph-stage .g-node[data-drawn]").count() >= 5
    expect(page.locator("#graph-picture-status")).to_contain_text("in each node what it computed")
    first = input_picture(page)
    assert first
    presets = page.locator("#lab [data-preset]")
    other = next(i for i in range(presets.count()) if presets.nth(i).get_attribute("aria-pressed") != "true")
    presets.nth(other).click()
    eventually(lambda: input_picture(page), lambda now: now and now != first)
    expect(stage).to_have_attribute("data-picture", "drawn")
    assert axe_violations(page) == []


def test_a_recorded_case_chosen_below_redraws_the_picture(watched):
    page = watched("/models/induction")
    graph_ready(page)
    pictures = "#graph-stage .g-node[data-drawn] image"
    drawn = "images => images.map((image) => image.getAttribute('href'))"
    before = page.eval_on_selector_all(pictures, drawn)
    page.locator("[data-case-id]:not(.is-current)").first.click()
    expect(page.locator("#graph-picture-status")).to_contain_text("the recorded case")
    eventually(lambda: page.eval_on_selector_all(pictures, drawn), lambda now: now and now != before)


def test_a_selected_node_shows_its_output_full_size_with_its_numbers(watched):
    page = watched("/models/lenet?open=stage1", bypass_csp=True)
    graph_ready(page)
    choose_node(page, "stage1.conv")
    computed = page.locator("#node-details .node-computed")
    expect(computed).to_contain_text("stage1.conv computed 6 maps of 8×8, from ")
    maps = computed.locator(".node-map")
    expect(maps).to_have_count(6)  # drawn large: every channel, whole
    expect(maps.first.locator("figcaption")).to_have_text("channel 0")
    expect(computed.locator("p.fine")).to_have_count(0)  # nothing left out to say
    choose_node(page, "stage2")  # a closed module: its output, 16 maps of 2×2, every one drawn
    expect(computed).to_contain_text("stage2 computed 16 maps of 2×2")
    title = maps.first.locator("svg title").nth(1).text_content()
    assert re.search(r"-?\d", title), title  # a cell says its number on hover
    assert axe_violations(page) == []


def test_every_model_page_draws_its_picture_with_shapes_on_its_arrows(watched):
    page = watched("/models/mlp")
    for slug in CATALOG_SLUGS:
        page.goto(page.url.rsplit("/models/", 1)[0] + f"/models/{slug}")
        graph_ready(page)
        # the lab's first run may come after the recorded case's picture, and draw it again
        state = eventually(lambda: page.locator("#graph-stage").get_attribute("data-picture"),
                           lambda now: now != "drawing")
        assert state in ("drawn", "waiting"), (slug, state, page.text_content("#graph-picture-status"))
        if state == "drawn":
            shapes = page.eval_on_selector_all("#graph-stage [data-shape]", "e => e.map((x) => x.dataset.shape)")
            assert len(shapes) >= 3, (slug, shapes)
