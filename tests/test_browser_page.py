"""The model page in a real browser as a reader finds it: its cases, tour, links, downloads and keyboard, with and
without scripts."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT

from .browsing import ARTIFACTS, DESKTOP, PHONE
from .page_checks import (
    graph_ready,
    lab_ready,
    settled,
)

pytestmark = pytest.mark.browser


def cell(page, row: int, col: int):
    return page.locator("#case-panel .value-table tbody tr").nth(row).locator("td").nth(col)


def test_switching_cases_shows_each_recorded_case(watched):
    page = watched("/models/bert")
    expect(cell(page, 0, 0)).to_have_text("0.1762")
    page.get_by_role("link", name="Mask one token in segment B").click()
    expect(page.locator("#case-panel")).to_have_attribute("data-case", "mask-b")
    expect(cell(page, 0, 0)).to_have_text("0.1744")
    expect(page.locator("#case-panel .chart-canvas svg rect[data-row='0'][data-col='0']")).to_have_count(1)
    expect(page.locator("#case-panel .metric dd").first).to_have_text("4.5")
    assert "case=mask-b" in page.url
    page.get_by_role("link", name="Same tokens with a negative sentence-pair label").click()
    expect(page.locator("#case-panel .metric dd").nth(1)).to_have_text("0.6372")
    page.go_back()
    expect(page.locator("#case-panel")).to_have_attribute("data-case", "mask-b")
    expect(cell(page, 0, 0)).to_have_text("0.1744")


def test_probabilities_are_drawn_from_0_to_1_and_other_bars_share_one_scale(watched):
    """A probability of 0.78 fills 78% of its track, whatever else the case holds; bars that are not probabilities
    (the MLP's hidden units over its four inputs, say) share one scale, the largest filling its track."""
    page = watched("/models/bert?case=mask-a")
    fills = page.locator("#case-panel .bar-fill")
    expect(fills).to_have_count(18)  # the 16 tokens' probabilities, and the sentence pair's two
    share = ("els => els.map(e => 100 * e.getBoundingClientRect().width"
             " / e.closest('.bar-track').getBoundingClientRect().width)")
    widths = fills.evaluate_all(share)
    assert widths[1] == pytest.approx(78.49, abs=0.2) and widths[16] == pytest.approx(47.12, abs=0.2)
    expect(page.locator(".bars-figure").first.locator(".bar-index").nth(1)).to_have_text("CLS")  # named by token
    shared = watched("/models/mlp?case=xor").locator("#case-panel .bar-fill")  # its four answers
    expect(shared).to_have_count(8)  # and XOR's four answers
    assert max(shared.evaluate_all(share)) == pytest.approx(100.0)


def test_tour_moves_the_highlight_and_centres_it(watched):
    page = watched("/models/bert")
    graph_ready(page)
    expect(page.locator("#tour-position")).to_have_text("Step 1 of 5")  # the overview: nothing highlighted
    expect(page.locator(".g-node.is-target")).to_have_count(0)
    page.locator("[data-step-link]").click()  # the overview's link to the heart of the tour
    expect(page.locator(".g-node.is-target")).to_have_attribute("data-id", "encoder.attention.softmax")
    expect(page.locator("#tour-position")).to_have_text("Step 3 of 5")
    page.get_by_role("button", name="Next step").click()
    target = page.locator(".g-node.is-target")
    expect(target).to_have_attribute("data-id", "mlm_decoder")
    expect(page.locator(".tour-step.is-current h4")).to_have_text("Predict only the selected original tokens")
    assert "step=masked" in page.url
    settled(page)  # the centring transition
    stage = page.locator("#graph-stage").bounding_box()
    box = target.bounding_box()
    assert stage["x"] < box["x"] + box["width"] / 2 < stage["x"] + stage["width"]
    assert stage["y"] < box["y"] + box["height"] / 2 < stage["y"] + stage["height"]
    page.get_by_role("button", name="Previous step").click()
    page.get_by_role("button", name="Previous step").click()
    expect(page.locator(".g-node.is-target")).to_have_attribute("data-id", "word_embeddings")
    page.get_by_role("button", name="Previous step").click()  # back to the overview: every module closed again
    expect(page.locator(".g-node.is-target")).to_have_count(0)
    expect(page.locator('#graph-stage .g-node[data-id="encoder"]')).to_have_count(1)
    expect(page.get_by_role("button", name="Previous step")).to_be_disabled()
    assert "step=overview" in page.url


def test_shared_url_opens_the_same_view(watched):
    page = watched("/models/bert?case=both&step=pair")
    graph_ready(page)
    expect(page.locator("#case-panel")).to_have_attribute("data-case", "both")
    expect(page.locator(".g-node.is-target")).to_have_attribute("data-id", "nsp_head")


def test_node_click_shows_op_params_and_source_lines(watched):
    page = watched("/models/bert")
    graph_ready(page)
    page.get_by_role("button", name="Fit").click()  # the whole graph in view
    settled(page)
    page.locator('.g-node[data-id="word_embeddings"]').click()
    details = page.locator("#node-details")
    expect(details.locator("h3")).to_have_text("word_embeddings")
    expect(details).to_contain_text("Embedding")
    expect(details).to_contain_text("num_embeddings=16, embedding_dim=8")
    expect(details).to_contain_text("model.py line 49")
    expect(details.locator(".source-line.is-hit")).to_have_text(
        re.compile(r"49\s*self\.word_embeddings = nn\.Embedding\(VOCAB, WIDTH\)"))
    page.locator('.g-node[data-id="add@TinyBertPretraining#0"]').focus()
    page.keyboard.press("Enter")
    expect(details.locator(".source-line.is-hit")).to_have_count(5)  # lines 65-69


def test_modules_collapse_and_expand(watched):
    page = watched("/models/bert?step=bidirectional")
    graph_ready(page)
    page.locator('[data-module="encoder"]').click()
    expect(page.locator('.g-node[data-id="encoder"]')).to_have_count(1)
    expect(page.locator('.g-node[data-id="encoder.up"]')).to_have_count(0)
    # the tour's target sits inside the collapsed module, which takes the highlight
    expect(page.locator(".g-node.is-target")).to_have_attribute("data-id", "encoder")
    page.locator('[data-module="encoder"]').click()
    expect(page.locator('.g-node[data-id="encoder.up"]')).to_have_count(1)
    # Closing a module keeps what was open inside it: the reopened encoder shows its attention open.
    expect(page.locator('.g-cluster[data-id="encoder.attention"]')).to_have_count(1)
    page.locator('[data-module="encoder.attention"]').click()
    expect(page.locator('.g-node[data-id="encoder.attention"]')).to_have_count(1)
    expect(page.locator('.g-cluster[data-id="encoder"]')).to_have_count(1)


def test_pan_and_zoom_change_the_view(watched):
    page = watched("/models/bert")
    graph_ready(page)
    viewport = page.locator("#graph-stage .viewport")
    before = viewport.get_attribute("transform")
    page.get_by_role("button", name="Zoom in").click()
    zoomed = viewport.get_attribute("transform")
    assert zoomed != before
    stage = page.locator("#graph-stage").bounding_box()
    page.mouse.move(stage["x"] + 20, stage["y"] + 20)
    page.mouse.down()
    page.mouse.move(stage["x"] + 120, stage["y"] + 80, steps=5)
    page.mouse.up()
    assert viewport.get_attribute("transform") != zoomed


def test_charts_download_as_svg_and_numbers_as_csv(watched, tmp_path):
    page = watched("/models/bert?case=mask-b&step=bidirectional")
    graph_ready(page)
    with page.expect_download() as info:
        page.locator(".heatmap-figure [data-export-svg]").click()
    svg = Path(info.value.path()).read_text()
    assert info.value.suggested_filename == "bert-mask-b-bidirectional-attention-head-0.svg"
    assert svg.startswith("<?xml") and "<svg" in svg and "row 0 (CLS, id 1), column 0 (CLS, id 1): 0.1744" in svg
    with page.expect_download() as info:
        page.locator(".bars-figure [data-export-svg]").first.click()
    assert "0.7253" in Path(info.value.path()).read_text()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download SVG").first.click()  # the graph
    graph_svg = Path(info.value.path()).read_text()
    assert 'data-id="encoder.attention.softmax"' in graph_svg
    # The tour's target keeps its mark without the page's stylesheet; nothing only the page uses is left.
    target = re.search(r'<g class="g-node is-target" data-id="encoder.attention.softmax"[^>]*><rect ([^>]*)>',
                       graph_svg)
    assert target and 'stroke="#b4532a"' in target[1] and 'stroke-width="3"' in target[1]
    assert "tabindex" not in graph_svg and "role=" not in graph_svg and "aria-label" not in graph_svg
    assert "▸" not in graph_svg and "▾" not in graph_svg
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV").click()
    assert Path(info.value.path()).read_text().startswith("case,kind,label,row,column,value")


def test_readable_without_javascript(watched):
    page = watched("/models/bert?case=mask-b", java_script_enabled=False)
    expect(cell(page, 0, 0)).to_have_text("0.1744")
    # The bars are drawn by the server, probabilities from 0 to 1: 0.7253 fills 72.5% of its track, 0.1248 an eighth.
    bars = page.locator("#case-panel .bars-figure").first.locator(".bar-row")
    expect(bars).to_have_count(16)
    widths = [bars.nth(i).locator(".bar-fill").bounding_box()["width"] for i in (14, 5)]
    track = bars.nth(14).locator(".bar-track").bounding_box()["width"]
    assert widths[0] == pytest.approx(track * 0.7253, rel=0.01) and widths[1] == pytest.approx(track * 0.1248, rel=0.02)
    # No blank column where the script would draw the heatmap: the value table starts at the figure's left edge.
    figure = page.locator("#case-panel .heatmap-figure").first
    assert figure.locator("table").bounding_box()["x"] - figure.bounding_box()["x"] < 2
    expect(page.locator(".tour-step")).to_have_count(5)  # the overview and the recipe's 4
    for step in page.locator(".tour-step").all():
        expect(step).to_be_visible()
    expect(page.locator(".snapshot img")).to_be_visible()
    expect(page.locator("#graph-explorer")).to_be_hidden()


def test_keyboard_reaches_the_controls(watched):
    page = watched("/models/bert")
    graph_ready(page)
    reached = set()
    for _ in range(150):  # past the lab's controls, which the page leads with, to the graph's
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement.textContent.trim().slice(0, 30)"))
        if {"+", "Fit", "Download SVG"} <= reached:
            break
    assert {"+", "Fit", "Download SVG"} <= reached


@pytest.mark.parametrize("name, path, viewport", [
    ("catalog-desktop", "/", DESKTOP), ("catalog-phone", "/", PHONE),
    ("model-desktop", "/models/bert", DESKTOP), ("model-phone", "/models/bert", PHONE),
    ("lenet-desktop", "/models/lenet", DESKTOP), ("lenet-phone", "/models/lenet", PHONE),
    ("bert-base-desktop", "/models/bert-base", DESKTOP), ("bert-base-phone", "/models/bert-base", PHONE),
    ("not-found-phone", "/models/nope", PHONE),
])
def test_screenshots_without_horizontal_scroll(browser, live_server, name, path, viewport):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    response = page.goto(live_server + path)
    if path.startswith("/models/") and "nope" not in path:
        graph_ready(page)
    assert response.status == (404 if "nope" in path else 200)
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)
    context.close()


def test_a_real_mouse_click_on_a_group_title_collapses_it(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    expect(page.locator('.g-cluster[data-id="h.0"]')).to_have_count(1)
    page.get_by_role("button", name="Fit").click()  # the tour's first step is lower down: bring the title in
    settled(page)
    title = page.locator('.g-cluster[data-id="h.0"] .g-cluster-title')
    title.scroll_into_view_if_needed()
    box = title.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.up()
    expect(page.locator('.g-cluster[data-id="h.0"]')).to_have_count(0)
    expect(page.locator('.g-node[data-id="h.0"]')).to_have_count(1)  # the group, collapsed to one node


@pytest.mark.parametrize("path", ["/", *(f"/models/{f.name}" for f in sorted((PROJECT_ROOT / "manifests").iterdir()))])
def test_no_visible_control_is_inert_without_scripts(watched, path):
    page = watched(path, java_script_enabled=False)
    expect(page.locator("h1")).to_be_visible()
    for button in page.locator("button:visible, [role=button]:visible, input[type=button]:visible").all():
        # Without scripts only a form's submit button does anything.
        assert button.get_attribute("type") in (None, "submit") and button.locator("xpath=ancestor::form").count(), \
            button.inner_text()


def test_a_failed_or_garbled_answer_is_reported_with_its_message(browser, live_server):
    context = browser.new_context(viewport=DESKTOP)  # not watched: the failures here are the point
    page = context.new_page()
    page.goto(live_server + "/models/bert")
    lab_ready(page)
    # Answers rewritten in the browser: a proxy's HTML page where JSON was due, and the API's JSON error.
    page.route("**/api/models/bert/verifications", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<html>proxy login</html>"))
    page.locator("#reverify").click()
    expect(page.locator("#verify-status")).to_have_text(
        "Verification could not finish: the server's answer (200) was not JSON")
    page.route("**/api/models/bert/runs", lambda route: route.fulfill(
        status=503, content_type="application/json",
        body=json.dumps({"error": {"status": 503, "name": "Service Unavailable", "message": "the recipe raised X"}})))
    page.locator('select[data-position="4"]').select_option("9")
    expect(page.locator("#lab-status")).to_have_text("The run failed: the recipe raised X")
    expect(page.locator("#lab-status")).to_have_class(re.compile("is-error"))
    context.close()


SIG_VALUES = [1.2345e-7, -1.2345e-7, 5.6257e-5, 0.2461, 1234567.0, 1.5e22, 3.0, 0.1, 1e-6, 9.99999e-7, -0.000012345,
              123.456, 7.0e-12, 0.00005626, -42.0, 0.999995, 1.227e-14, 1e-4, 9.99996e-5, 0.00012345, 1.5e-300]


def test_the_browser_rounds_numbers_as_the_server_does(watched):
    """One rule for significant figures: the page's sig() writes what the server's filter writes, positional down
    to 1e-4 and scientific below it (1.2e-14, never 0.000000000000012)."""
    from app.domain.numbers import in_prose, significant

    page = watched("/models/bert")
    graph_ready(page)
    charts = page.evaluate("""async (values) => {
        const src = document.querySelector('script[type="module"]').src.replace(/model-page\\.js$/, "charts.js");
        const { inProse, sig } = await import(src);
        return [values.map((v) => sig(v)), values.map((v) => inProse(v))];
    }""", SIG_VALUES)
    assert charts[0] == [significant(v) for v in SIG_VALUES]
    assert charts[1] == [in_prose(v) for v in SIG_VALUES]  # prose: "about 0" below 1e-4
    assert in_prose(6.287e-17) == "about 0" and in_prose(0.0) == "0" and in_prose(1e-4) == "0.0001"

