"""The explorer in a real browser: Debian's Chromium driven by Playwright against a live server."""

import json
import math
import re
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import torch
from playwright.sync_api import expect
from werkzeug.serving import make_server

from app import create_app
from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT, TestConfig
from app.services.parts import parts

from .browsing import ARTIFACTS, DESKTOP, PHONE
from .conftest import CATALOG_SLUGS, LENET_RECIPE, RECORDED_LAB_SLUGS, eventually, recipe_module
from .test_training import TRAINED

pytestmark = pytest.mark.browser

def graph_ready(page) -> None:
    expect(page.locator("#graph-stage svg .g-node").first).to_be_visible()


def settled(page) -> None:
    """Wait until the graph's pan and zoom transition (and any other animation) has finished (polled: the page's
    CSP forbids the eval that wait_for_function needs)."""
    for _ in range(250):
        if page.evaluate("document.getAnimations().length") == 0:
            return
        page.wait_for_timeout(20)
    raise AssertionError("the page kept animating for 5 s")


def cell(page, row: int, col: int):
    return page.locator("#case-panel .value-table tbody tr").nth(row).locator("td").nth(col)


def test_switching_cases_shows_each_recorded_case(watched):
    page = watched("/models/bert")
    expect(cell(page, 0, 0)).to_have_text("0.1762")
    page.get_by_role("link", name="Mask one token in segment B").click()
    expect(page.locator("#case-panel")).to_have_attribute("data-case", "mask-b")
    expect(cell(page, 0, 0)).to_have_text("0.1744")
    expect(page.locator("#case-panel .chart-canvas svg rect[data-row='0'][data-col='0']")).to_have_count(1)
    expect(page.locator(".metric dd").first).to_have_text("4.5")
    assert "case=mask-b" in page.url
    page.get_by_role("link", name="Same tokens with a negative sentence-pair label").click()
    expect(page.locator(".metric dd").nth(1)).to_have_text("0.6372")
    page.go_back()
    expect(page.locator("#case-panel")).to_have_attribute("data-case", "mask-b")
    expect(cell(page, 0, 0)).to_have_text("0.1744")


def test_bars_share_one_scale(watched):
    page = watched("/models/bert?case=mask-a")
    fills = page.locator("#case-panel .bar-fill")
    expect(fills).to_have_count(18)
    widths = fills.evaluate_all("els => els.map(e => 100 * e.getBoundingClientRect().width"
                                " / e.closest('.bar-track').getBoundingClientRect().width)")
    assert max(widths) == pytest.approx(100.0)  # the largest value of the case fills its track
    assert widths[1] == pytest.approx(100.0) and 0 < widths[9] < widths[1]


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


def test_reverification_shows_progress_then_a_passing_report(watched):
    page = watched("/models/bert?case=mask-b")
    graph_ready(page)
    # By keyboard: a click is aimed at coordinates, and on a loaded machine the lab's first answer can land
    # between aiming and clicking and move the button (seen once in CI); Enter reaches it wherever it is.
    page.get_by_role("button", name="Re-verify on the server").press("Enter")
    expect(page.locator("#verify-status")).to_contain_text(re.compile(r"(Queued|Running)"))
    headline = page.locator("#report-headline")
    expect(headline).to_contain_text("Passed — all 300 recorded numbers", timeout=120_000)
    expect(page.locator(".report-case")).to_have_count(4)
    opened = page.locator('.report-case[data-case="mask-b"]')
    expect(opened.locator("tbody tr")).to_have_count(9)
    expect(opened.locator("tbody tr .status-passed")).to_have_count(9)
    expect(opened.locator(".deviation svg").first).to_be_visible()
    expect(page.locator(".report-checks li")).to_have_count(4)
    # What a check measured in words; the recipe's own keys a click away.
    first = page.locator(".report-checks li").first
    expect(first.locator("div.detail").last).to_contain_text("bidirectional max shift: ")
    raw = first.locator("details.raw-keys")
    expect(raw.locator("code")).to_be_hidden()
    raw.locator("summary").click()
    expect(raw.locator("code")).to_contain_text('"bidirectional_max_shift":')
    expect(page.locator(".report-env")).to_contain_text("deterministic")
    # The original capture's model.py is not the one served: said where the two hashes are shown.
    expect(page.locator(".report-env")).to_contain_text("(another file)")
    expect(page.locator(".report-source-note")).to_contain_text("captured from a different model.py")
    page.get_by_role("button", name="Re-verify on the server").click()
    expect(page.locator("#verify-status")).to_contain_text("identical earlier run", timeout=30_000)
    # A kept report comes back in milliseconds, and says so rather than "0.0 s".
    expect(page.locator("#verify-status")).to_have_text(
        re.compile(r"^Done in \d+ ms \(the report of an identical earlier run"))


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
    # The bars are drawn by the server, on one scale: 0.7253 fills its track, 0.1248 about a sixth of it.
    bars = page.locator("#case-panel .bars-figure").first.locator(".bar-row")
    expect(bars).to_have_count(16)
    widths = [bars.nth(i).locator(".bar-fill").bounding_box()["width"] for i in (14, 5)]
    track = bars.nth(14).locator(".bar-track").bounding_box()["width"]
    assert widths[0] == pytest.approx(track, rel=0.01) and widths[1] == pytest.approx(track * 0.1248 / 0.7253, rel=0.02)
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
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement.textContent.trim().slice(0, 30)"))
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


# ---- the live lab


def lab_ready(page) -> None:
    expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case", timeout=120_000)


def test_lab_starts_from_a_recorded_case_and_reproduces_it(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.locator('[data-preset="not-next"]').click()
    expect(page.locator("#record-check")).to_contain_text("“Same tokens with a negative sentence-pair label”")
    expect(page.locator("#record-check")).to_have_class(re.compile("is-passed"))
    expect(page.locator('input[name="nsp"][value="1"]')).to_be_checked()
    expect(page.locator(".lab-column .metric dd").nth(1)).to_have_text("0.6372")


def test_editing_a_token_updates_the_results_in_place(watched):
    page = watched("/models/bert")
    lab_ready(page)
    before = page.locator(".lab-column .metric dd").first.inner_text()
    expect(page.locator('#lab [data-preset="mask-a"]')).to_have_attribute("aria-pressed", "true")
    page.locator('select[data-position="4"]').select_option("9")
    expect(page.locator("#record-check")).to_have_count(0)  # no longer a recorded case
    expect(page.locator('#lab [data-preset="mask-a"]')).to_have_attribute("aria-pressed", "false")
    expect(page.locator(".lab-column .metric dd").first).not_to_have_text(before)
    expect(page.locator(".influence")).to_contain_text("You changed position 4: 4 of 4 earlier")
    page.locator('[data-mask="1"]').click()  # score position 1 as well
    expect(page.locator('select[data-position="1"]')).to_have_value("3")
    expect(page.locator(".lab-column figcaption", has_text="Position 1: top 5 of 16")).to_have_count(1)


def test_compare_mode_shows_both_and_marks_which_predictions_moved(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.locator("#compare-mode").check()
    expect(page.locator(".lab-column")).to_have_count(2)
    expect(page.locator(".lab-difference svg")).to_have_count(2)
    page.locator('select[data-position="4"]').select_option("9")
    bidirectional = page.locator('.influence[data-mode="bidirectional"]')
    causal = page.locator('.influence[data-mode="causal"]')
    expect(bidirectional).to_contain_text("4 of 4 earlier positions' predictions moved")
    expect(causal).to_contain_text("0 of 4 earlier positions' predictions moved")
    expect(page.locator('.lab-column[data-mode="causal"] .is-moved')).to_have_count(0)
    expect(page.locator('.lab-column[data-mode="bidirectional"] .is-moved')).to_have_count(4)


def test_compare_mode_arranges_both_attentions_alike_and_names_every_mask_button(watched):
    page = watched("/models/bert")
    lab_ready(page)
    names = [b.get_attribute("aria-label") for b in page.locator(".mask-toggle").all()]
    assert len(names) == 6 and len(set(names)) == 6 and all(n.startswith(("mask", "scored")) for n in names)
    page.locator("#compare-mode").check()
    expect(page.locator(".lab-column")).to_have_count(2)

    def arrangement(mode: str) -> list[tuple[int, int]]:
        column = page.locator(f'.lab-column[data-mode="{mode}"]').bounding_box()
        boxes = [f.bounding_box() for f in page.locator(f'.lab-column[data-mode="{mode}"] .lab-heatmap').all()]
        return [(round(b["x"] - column["x"]), round(b["y"] - boxes[0]["y"])) for b in boxes]

    assert arrangement("bidirectional") == arrangement("causal")


def test_sampling_a_corruption_fills_the_strip(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.locator("#corruption-seed").fill("7")
    page.get_by_role("button", name="Sample a corruption").click()
    expect(page.locator("#lab-status")).to_contain_text("Seed 7 selected position 1: mask")
    expect(page.locator('select[data-position="1"]')).to_have_value("3")
    expect(page.locator(".token-slot .badge.action-mask")).to_have_count(1)
    expect(page.locator(".lab-column h3")).to_contain_text("Live run")
    page.locator("#corruption-seed").fill("-3")
    page.get_by_role("button", name="Sample a corruption").click()
    expect(page.locator("#lab-status")).to_contain_text("The seed must be a whole number")


def test_trace_view_follows_the_token_through_every_stage(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.get_by_role("button", name="Trace position 2").click()
    expect(page.locator("#trace-title")).to_have_text("Trace of position 2 (MASK (3)), bidirectional attention")
    assert "trace=2" in page.url and "trace_attention=bidirectional" in page.url
    page.goto(page.url)  # a link (or a reload) traces the same position again
    expect(page.locator("#trace-title")).to_have_text("Trace of position 2 (MASK (3)), bidirectional attention",
                                                      timeout=60_000)
    expect(page.locator(".trace-stage")).to_have_count(11)
    expect(page.locator('[data-stage="attention"] svg')).to_have_count(2)
    softmax = page.locator('[data-stage="softmax"]')
    expect(softmax.locator("tbody tr").first.locator("td").last).to_have_text("0.7849")
    expect(softmax.locator(".trace-prediction")).to_have_text("Predicted token: CLS (1) with probability 0.7849")
    expect(page.locator('[data-stage="nsp"] .trace-prediction')).to_have_text("Sentence pair: NotNext")
    # The FFN's units before and after GELU line up column by column, each marked passed or squeezed.
    rows = page.locator('[data-stage="ffn_up"] .vector-table tbody tr')
    before, after = rows.nth(0).locator("td"), rows.nth(1).locator("td")
    expect(before).to_have_count(32)
    expect(after).to_have_count(32)
    for unit in (0, 7, 31):
        assert before.nth(unit).bounding_box()["x"] == after.nth(unit).bounding_box()["x"]
        value = float(before.nth(unit).get_attribute("title"))
        expect(after.nth(unit)).to_have_class("is-passed" if value > 0 else "is-squeezed")


def test_lab_screenshot_in_compare_mode(browser, live_server):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(live_server + "/models/bert")
    lab_ready(page)
    page.locator("#compare-mode").check()
    expect(page.locator(".lab-column")).to_have_count(2)  # both modes have run once: changes can be compared
    page.locator('select[data-position="4"]').select_option("9")
    expect(page.locator('.influence[data-mode="causal"]')).to_be_visible()
    page.get_by_role("button", name="Trace position 2").first.click()
    expect(page.locator(".trace-stage")).to_have_count(11)
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / "lab-compare-desktop.png")
    context.close()


def test_the_lab_waits_and_retries_when_the_server_is_busy(browser):
    app = create_app(type("Busy", (TestConfig,), {"RECIPE_WORKERS": 1, "RECIPE_QUEUE": 0}))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pool = parts(app).pool
    pool.admit()  # the only place is taken: the page's first run is refused with 429
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    try:
        page.goto(f"http://127.0.0.1:{server.server_port}/models/bert")
        expect(page.locator("#lab-status")).to_contain_text("The server is busy; trying again in 5 s")
        pool.release()  # the place frees up: the retry goes through
        expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case", timeout=120_000)
    finally:
        context.close()
        server.shutdown()
        pool.shutdown()


# ---- the second milestone: GPT and its causal-LM lab


def test_gpt_page_lab_generates_and_traces(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case", timeout=120_000)
    expect(page.locator("#live-loss")).to_have_text("10.32")
    # A later token changes only later predictions: edit the last token and the loss moves.
    page.select_option('select[data-position="6"]', label="9")
    expect(page.locator("#record-check")).to_have_count(0)
    expect(page.locator("#live-loss")).not_to_have_text("10.32")
    for _ in range(3):  # back to the problem and "=": four steps write the answer (the last is never read)
        page.locator("#remove-token").click()
    page.locator("#gen-steps").fill("4")
    page.locator("#generate").click()
    expect(page.locator(".generation-step")).to_have_count(4)
    expect(page.locator("#generation-text")).to_contain_text("3 1 4 1 = 1 1 3 4")
    page.locator('[data-trace="1"]').click()
    expect(page.locator("#trace-title")).to_contain_text("position 1")
    expect(page.locator("#trace .trace-table").first).to_contain_text("masked")
    # The link holds the generation and the trace: a reload shows both again; a new prompt drops them.
    assert "gen_steps=4" in page.url and "trace=1" in page.url
    page.goto(page.url)
    expect(page.locator("#generation-text")).to_contain_text("3 1 4 1 = 1 1 3 4", timeout=120_000)
    expect(page.locator(".generation-step")).to_have_count(4)
    expect(page.locator("#trace-title")).to_contain_text("position 1")
    page.locator("#add-token").click()
    assert "gen_steps" not in page.url and "trace=" not in page.url
    page.locator('[data-module="h.1"]').click()  # open the second block: the first one stays open
    expect(page.locator('#graph-stage .g-node[data-id="h.1.attn"]')).to_have_count(1)
    expect(page.locator('#graph-stage .g-cluster[data-id="h.0"]')).to_have_count(1)
    expect(page.locator('#graph-stage .g-cluster[data-id="h.1"]')).to_have_count(1)


def test_a_large_heatmap_is_one_image_that_names_the_cell_under_the_pointer_and_its_table_joins_when_opened(watched):
    """A map of more than 20 x 20 cells (the sampler's chain, 51 x 64 block means) is one image, not a rectangle
    and a title per cell; the pointer's cell is named as a cell's title would name it, with the table's value;
    its table, closed, is out of the page until it is opened."""
    page = watched("/models/ddpm")
    lab_ready(page)
    page.locator("#case-panel details.more-figures > summary").click()  # the chain's maps come after its frames
    figure = page.locator('#case-panel figure[data-chart="heatmap"]').first
    image = figure.locator("svg image.raster-grid")
    expect(image).to_have_count(1)
    assert figure.locator("svg rect[data-row]").count() == 0
    assert [image.get_attribute("data-rows"), image.get_attribute("data-cols")] == ["51", "64"]
    expect(figure.locator(".value-table")).to_have_count(0)
    image.scroll_into_view_if_needed()
    side = image.bounding_box()["width"] / 64
    # The middle of a map taller than its box (which scrolls, as a long table's does): scrolled to, then pointed at.
    figure.locator(".chart-canvas").evaluate("(canvas, y) => { canvas.scrollTop = y; }", 25.5 * side - 100)
    box = image.bounding_box()
    page.mouse.move(box["x"] + 2.5 * side, box["y"] + 25.5 * side)
    expect(image.locator("title")).to_have_text(re.compile(r"^row 25, column 2: -?[0-9.]+$"))
    said = image.locator("title").text_content().split(": ")[1]
    figure.locator(".value-details summary").click()
    expect(figure.locator(".value-table tbody tr")).to_have_count(51)
    expect(figure.locator(".value-table tbody tr").nth(25).locator("td").nth(2)).to_have_text(said)
    figure.locator(".value-details summary").click()  # closed and opened again, the table is there once
    figure.locator(".value-details summary").click()
    expect(figure.locator(".value-table")).to_have_count(1)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_heatmaps_are_labelled_with_tokens_and_a_phone_reads_every_column(watched, viewport):
    """Recorded and live heatmaps name their tokens on both axes (ids on hover); on a phone nothing is drawn
    under 12 px, a chart wider than the screen says that it scrolls, and the next-token table reflows so that
    "actual next token" and "loss" are on screen."""
    page = watched("/models/gpt", viewport)
    lab_ready(page)
    heatmaps = page.locator('#case-panel figure[data-chart="heatmap"]')
    # The recorded case "pi": 3 1 4 1 = 1 1 3, where "=" (id 10) is the one token no index reads as.
    expect(heatmaps.first.locator("svg text").filter(has_text=re.compile("^=$"))).to_have_count(2)  # row and column
    cell = heatmaps.first.locator('rect[data-row="4"][data-col="0"] title')
    expect(cell).to_have_text(re.compile(r"^row 4 \(=, id 10\), column 0 \(3, id 3\): "))
    live = page.locator(".lab-heatmap svg").first
    expect(live.locator("text").filter(has_text=re.compile("^=$"))).to_have_count(2)
    page.locator("#case-panel .more-figures > summary").click()  # the figures past the first two, folded
    vocabulary = heatmaps.last
    if viewport is PHONE:
        assert small_text(page) == []
        expect(vocabulary.locator(".chart-canvas")).to_have_class(re.compile("is-scrollable"))
        for label in ("actual next token", "loss"):
            cells = page.locator(f'#lab-results td[data-label="{label}"]')
            expect(cells).to_have_count(8)
            box = cells.last.bounding_box()
            assert 0 <= box["x"] and box["x"] + box["width"] <= PHONE["width"]


def test_lab_inputs_live_in_the_url_so_a_reload_or_a_link_shows_them_again(watched):
    page = watched("/models/gpt")
    lab_ready(page)
    page.select_option('select[data-position="6"]', label="9")
    expect(page).to_have_url(re.compile(r"prompt=3%2C1%2C4%2C1%2C10%2C1%2C9%2C3"))
    expect(page.locator("#live-loss")).not_to_have_text("10.32")  # the recorded prompt's loss
    loss = page.locator("#live-loss").text_content()
    page.reload()
    expect(page.locator('select[data-position="6"] option:checked')).to_have_text("9")
    expect(page.locator("#live-loss")).to_have_text(loss)
    page.goto(page.url.replace("prompt=3%2C1", "prompt=3%2Cx"))  # a malformed link says so and falls back
    expect(page.locator("#lab-status")).to_contain_text(
        "The link's input could not be used (prompt must be whole numbers")
    expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case")

    bert = watched("/models/bert")
    lab_ready(bert)
    bert.locator('[data-mask="1"]').click()
    bert.locator("#compare-mode").check()
    expect(bert).to_have_url(re.compile(r"scored=1%2C2.*compare=1"))
    expect(bert.locator(".lab-column")).to_have_count(2)  # the runs answered: a reload aborts none
    expect(bert.locator("#lab-status")).to_contain_text("Done:")
    bert.reload()
    expect(bert.locator(".lab-column")).to_have_count(2)
    expect(bert.locator('[data-mask="1"]')).to_have_attribute("aria-pressed", "true")
    expect(bert.locator('select[data-position="1"]')).to_have_value("3")

    lenet = watched("/models/lenet")
    lab_ready(lenet)
    with lenet.expect_response("**/api/models/lenet/runs"):
        lenet.locator("#clear-drawing").click()
    with lenet.expect_response("**/api/models/lenet/runs"):  # answered before the reload, so none is aborted
        grid_cell(lenet, 2, 3).click()
    expect(lenet).to_have_url(re.compile(r"drawing=0+\.0+\.000[1-9a-g]0+\."))
    lenet.reload()
    expect(grid_cell(lenet, 2, 3)).to_have_attribute("aria-label", re.compile(r"level [1-9]"))
    expect(grid_cell(lenet, 0, 0)).to_have_attribute("aria-label", re.compile(r"level 0$"))


def test_a_run_that_waits_shows_its_progress(watched):
    page = watched("/models/gpt")
    lab_ready(page)
    page.evaluate("""() => { window.statuses = []; const status = document.querySelector("#lab-status");
        new MutationObserver(() => window.statuses.push(status.textContent))
          .observe(status, { childList: true, characterData: true, subtree: true }); }""")

    def slow(route):
        time.sleep(2.5)  # a recipe process still starting
        route.continue_()

    page.route("**/api/models/gpt/runs", slow)
    page.select_option('select[data-position="6"]', label="9")
    expect(page.locator("#lab-status")).to_contain_text("Live run done", timeout=30_000)
    waited = [s for s in page.evaluate("window.statuses") if "so far" in s]
    assert waited and re.match(r"Running the recipe on the server… [12] s so far; a first run after", waited[0])


def test_gpt_steps_follow_the_prompt_length(watched):
    page = watched("/models/gpt")
    lab_ready(page)
    steps = page.locator("#gen-steps")
    # The first case fills the context of 8: one step still fits, since the last new token is never read.
    expect(steps).to_have_value("1")
    expect(steps).to_have_attribute("max", "1")
    page.locator("#remove-token").click()  # 7 tokens: the page's 4 comes back as far as it fits
    expect(steps).to_have_value("2")
    page.locator("#remove-token").click()
    expect(steps).to_have_value("3")
    page.locator("#remove-token").click()
    expect(steps).to_have_value("4")
    page.locator("#add-token").click()
    expect(steps).to_have_value("3")
    steps.fill("4")  # more than fits: said on the page, no request refused by the server
    page.locator("#generate").click()
    expect(page.locator("#generation")).to_contain_text("Steps: at most 3 with this 6-token prompt")
    expect(page.locator(".generation-step")).to_have_count(0)


# ---- the vision milestone: LeNet and its image-classifier lab


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


def drawn_image(request) -> list[list[int]]:
    return json.loads(request.post_data)["image"]


def read_as(image: list[list[int]]) -> str:
    """What the recipe itself reads in this drawing: the page must say the same."""
    from recipekit.digits import pixels

    model = recipe_module(LENET_RECIPE, "model")
    with torch.no_grad():
        return str(int(model.build_model()(pixels(image)).argmax()))


def test_lenet_lab_reads_a_digit_drawn_with_the_mouse(watched):
    page = watched("/models/lenet")
    graph_ready(page)
    lab_ready(page)
    expect(page.locator("#draw-prediction strong")).to_have_text("0")
    expect(page.locator("#draw-loss")).to_be_visible()  # the recorded case's own digit scores it
    expect(page.locator('#lab-results .feature-stage[data-stage="stage1_act"] h4')).to_contain_text(
        "Stage 1 conv + tanh")  # the stages the recipe declares, in its words
    expect(page.locator("#lab-results .feature-stage")).to_have_count(4)
    # Clear forgets the recorded case's digit: a blank grid is scored against no digit the reader did not pick.
    with page.expect_request(lambda r: r.url.endswith("/api/models/lenet/runs")) as cleared:
        page.locator("#clear-drawing").click()
    assert "label" not in json.loads(cleared.value.post_data)
    expect(page.locator("#draw-label")).to_have_value("")
    expect(page.locator("#record-check")).to_have_count(0)
    expect(page.locator("#draw-loss")).to_have_count(0)
    expect(grid_cell(page, 3, 3)).to_have_attribute("aria-label", "Row 4, column 4: level 0")
    with page.expect_request(lambda r: r.url.endswith("/runs") and any(drawn_image(r)[6])) as sent:
        stroke(page, 4, 1, 6)
    image = drawn_image(sent.value)
    assert [row[4] for row in image] == [0, 16, 16, 16, 16, 16, 16, 0]
    assert sum(map(sum, image)) == 6 * 16
    expect(grid_cell(page, 4, 4)).to_have_attribute("aria-label", "Row 5, column 5: level 16")
    expect(page.locator("#draw-prediction strong")).to_have_text(read_as(image))
    expect(page.locator("#draw-saliency svg rect[data-row]")).to_have_count(64)
    page.locator("#trace-class").click()
    expect(page.locator("#trace-summary")).to_contain_text(f"Digit {read_as(image)}:")
    expect(page.locator('#trace [data-stage="input"]')).to_be_visible()
    expect(page.locator("#trace")).to_contain_text("Tanh bends the signal")  # the recipe's own method, said
    with page.expect_request(lambda r: r.url.endswith("/runs") and json.loads(r.post_data).get("label") == 1):
        page.locator("#draw-label").select_option("1")  # a digit the reader picks: now there is a loss
    expect(page.locator("#draw-loss")).to_be_visible()


def lab_kind(slug: str) -> str | None:
    return read_metadata(PROJECT_ROOT / "recipes" / slug).get("lab", {}).get("kind")


IMAGE_LABS = [slug for slug in RECORDED_LAB_SLUGS if lab_kind(slug) == "image-classifier"]


@pytest.mark.parametrize("slug", IMAGE_LABS)
def test_an_image_lab_draws_with_the_keyboard_and_the_mouse_and_keeps_focus(watched, slug):
    page = watched(f"/models/{slug}")
    lab_ready(page)
    page.locator("#clear-drawing").click()
    grid_cell(page, 0, 0).focus()
    for key in ("ArrowRight", "ArrowRight", "ArrowDown", "ArrowDown", "ArrowDown"):
        page.keyboard.press(key)
    assert page.evaluate("[document.activeElement.dataset.row, document.activeElement.dataset.col]") == ["3", "2"]
    assert page.locator('#draw-grid [tabindex="0"]').count() == 1  # one tab stop: the grid
    with page.expect_request(lambda r: r.url.endswith("/runs") and drawn_image(r)[3][2] == 15) as sent:
        page.keyboard.press("Space")
        page.keyboard.press("Minus")
    assert sum(map(sum, drawn_image(sent.value))) == 15
    expect(grid_cell(page, 3, 2)).to_have_attribute("aria-label", "Row 4, column 3: level 15")
    assert page.evaluate("document.activeElement.dataset.row") == "3"  # focus stayed on the cell
    page.keyboard.press("Delete")
    expect(grid_cell(page, 3, 2)).to_have_attribute("aria-label", "Row 4, column 3: level 0")
    expect(page.locator("#lab-status")).to_contain_text("Read as")
    with page.expect_request(lambda r: r.url.endswith("/runs") and drawn_image(r)[5][1] == 16):
        grid_cell(page, 5, 1).click()  # and the mouse, as a reader without a keyboard would
    expect(grid_cell(page, 5, 1)).to_have_attribute("aria-label", "Row 6, column 2: level 16")


@pytest.mark.parametrize("slug", IMAGE_LABS)
def test_an_image_lab_at_375px_draws_by_touch(watched, slug):
    page = watched(f"/models/{slug}", PHONE, has_touch=True, is_mobile=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    box = page.locator("#draw-grid").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    cell_box = grid_cell(page, 0, 0).bounding_box()
    assert cell_box["width"] >= 24 and cell_box["height"] >= 24
    page.locator("#clear-drawing").tap()
    with page.expect_request(lambda r: r.url.endswith("/runs") and drawn_image(r)[2][5] == 16):
        grid_cell(page, 2, 5).tap()
    expect(grid_cell(page, 2, 5)).to_have_attribute("aria-label", "Row 3, column 6: level 16")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / f"{slug}-lab-phone.png")


# Every text of the case's charts: the sizes it is drawn at (font size times the SVG's scale), and those that
# reach outside their chart.
CHART_TEXT = """() => {
  const sizes = new Set(), cut = [];
  for (const svg of document.querySelectorAll('#case-panel svg')) {
    const box = svg.getBoundingClientRect();
    const scale = box.width / (svg.viewBox.baseVal?.width || box.width);
    for (const text of svg.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      sizes.add(Math.round(parseFloat(getComputedStyle(text).fontSize) * scale * 10) / 10);
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5) cut.push(text.textContent);
    }
  }
  return { sizes: [...sizes], cut };
}"""


def test_feature_maps_are_small_multiples_their_values_a_click_away_and_no_chart_text_is_cut(watched):
    page = watched("/models/lenet?case=three")
    lab_ready(page)
    # The first figure shown (the drawing), the rest folded: every stage's maps among them.
    expect(page.locator("#case-panel > .heatmap-figure").first).to_be_visible()
    expect(page.locator("#case-panel .multiples-figure").nth(0)).to_be_hidden()
    page.locator("#case-panel .more-figures > summary").click()
    stage = page.locator("#case-panel .multiples-figure").nth(3)
    expect(stage.locator(".feature-map svg")).to_have_count(16)
    # The page was 25,000 px tall on a desktop and 41,000 px on a phone, its lab 21,000 px down.
    assert page.evaluate("document.documentElement.scrollHeight") < 12_000
    assert page.evaluate("document.getElementById('lab').getBoundingClientRect().top + scrollY") < 7_000
    assert page.evaluate(CHART_TEXT) == {"sizes": [12], "cut": []}  # legends and axes whole, at one size
    table = stage.locator(".value-table").first
    expect(table).to_be_hidden()
    stage.locator("summary").click()
    expect(table).to_be_visible()
    expect(table.locator("td").first).to_have_text(re.compile(r"^-?[0-9.]+$"))
    phone = watched("/models/lenet", PHONE)
    lab_ready(phone)
    assert phone.evaluate("document.documentElement.scrollHeight") <= 8_000  # as loaded: the case and answers cut
    assert phone.evaluate(CHART_TEXT)["cut"] == []


def test_the_vision_transformer_draws_where_the_class_token_looks_over_the_drawing(watched):
    page = watched("/models/vit?case=misread")
    lab_ready(page)
    expect(page.locator("#case-panel [data-over] .feature-map svg")).to_have_count(8)
    maps = page.locator('#lab-results .feature-stage[data-stage="attn1"] svg')
    expect(maps).to_have_count(4)
    expect(maps.first.locator("rect")).to_have_count(64 + 16)  # the drawing's pixels, then the 4 x 4 patches
    expect(page.locator('#lab-results .feature-stage[data-stage="attn1"] h4')).to_contain_text("4 heads")
    page.locator("#clear-drawing").click()
    with page.expect_request(lambda r: r.url.endswith("/runs") and drawn_image(r)[2][5] == 16):
        grid_cell(page, 2, 5).click()
    expect(page.locator("#lab-status")).to_contain_text("Read as")
    fills = maps.first.locator("rect").evaluate_all("rects => rects.slice(0, 64).map((r) => r.getAttribute('fill'))")
    assert fills[2 * 8 + 5] == "rgb(0, 0, 0)" and set(fills) - {fills[2 * 8 + 5]} == {"rgb(255, 255, 255)"}


def decoded_code(request) -> list[float]:
    return json.loads(request.post_data)["code"]


def test_the_autoencoder_lab_encodes_a_drawing_moves_its_code_and_walks_between_digits(watched):
    page = watched("/models/vae")
    lab_ready(page)
    expect(page.locator("#code-terms .metric")).to_have_count(3)
    expect(page.locator("#walk-path .code-image")).to_have_count(8)  # the first walk, between two recorded digits
    page.locator("#clear-drawing").click()
    with page.expect_request(lambda r: r.url.endswith("/vae/runs") and any(drawn_image(r)[6])) as sent:
        stroke(page, 3, 1, 6)
    assert [row[3] for row in drawn_image(sent.value)] == [0, 16, 16, 16, 16, 16, 16, 0]
    expect(page.locator("#lab-status")).to_contain_text("Encoded as z = (")
    # The keyboard moves the code with a slider, and the server decodes where it stops.
    page.locator("#latent-0").focus()
    with page.expect_request(lambda r: r.url.endswith("/vae/decode") and decoded_code(r)[0] == 3):
        page.keyboard.press("End")
    expect(page.locator("#decoded figcaption")).to_contain_text("Decoded at z = (3.00, ")
    assert page.evaluate("document.activeElement.id") == "latent-0"
    # A click on the map's top-left corner decodes a code near (-2.8, 2.8), the corner of the drawn plane.
    plane = page.locator("#latent-map svg").bounding_box()
    with page.expect_request(lambda r: r.url.endswith("/vae/decode") and decoded_code(r)[0] < -2.5) as clicked:
        page.mouse.click(plane["x"] + 2, plane["y"] + 2)
    assert decoded_code(clicked.value)[1] > 2.5
    expect(page.locator("#latent-0-value")).to_have_text(re.compile(r"^-2\.[6-9]"))
    page.locator("#walk-a").select_option("")  # from the drawing just made
    page.locator("#walk-b").select_option("three")
    with page.expect_request(lambda r: r.url.endswith("/vae/between") and json.loads(r.post_data)["a"][3][3] == 16):
        page.locator("#walk").click()
    expect(page.locator("#walk-said")).to_contain_text("From your drawing")
    expect(page.locator("#walk-said")).to_contain_text("to Test digit 14: a 3")
    # The link holds the drawing, the code moved by hand and the walk's ends: a reload shows them again.
    code = page.locator("#latent-0-value").inner_text(), page.locator("#latent-1-value").inner_text()
    assert "code=" in page.url and "walk_a=&walk_b=three" in page.url
    page.goto(page.url)
    expect(page.locator("#decoded figcaption")).to_contain_text(f"Decoded at z = ({code[0]}, {code[1]})",
                                                                 timeout=60_000)
    expect(page.locator("#walk-said")).to_contain_text("From your drawing")
    expect(page.locator("#walk-said")).to_contain_text("to Test digit 14: a 3")
    with page.expect_response(lambda r: r.url.endswith("/vae/runs")):
        page.locator("#clear-drawing").click()  # a new drawing: its own code, the hand-moved one dropped
    page.wait_for_function("!location.search.includes('code=')")


def test_the_autoencoder_lab_at_375px_draws_and_moves_the_code_by_touch(watched):
    page = watched("/models/vae", PHONE, has_touch=True, is_mobile=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.locator("#clear-drawing").tap()
    with page.expect_request(lambda r: r.url.endswith("/vae/runs") and drawn_image(r)[2][5] == 16):
        grid_cell(page, 2, 5).tap()
    plane = page.locator("#latent-map svg")
    plane.scroll_into_view_if_needed()
    box = plane.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    with page.expect_request(lambda r: r.url.endswith("/vae/decode") and decoded_code(r)[1] < -2):
        plane.tap(position={"x": box["width"] / 2, "y": box["height"] - 3})
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / "vae-lab-phone.png")


def test_the_recurrent_lab_is_typed_and_stepped_with_the_keyboard(watched):
    page = watched("/models/lstm")
    lab_ready(page)
    text = page.locator("#seq-text")
    text.focus()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    expect(page.locator("#lab-status")).to_have_text("Add a token to start.")
    with page.expect_request(lambda r: r.url.endswith("/runs") and json.loads(r.post_data)["tokens"] == [0, 0, 1, 0]):
        page.keyboard.type("(()(")
    expect(page.locator("#lab-status")).to_contain_text("Read 4 tokens, 4 of them right")
    assert "tokens=0%2C0%2C1%2C0" in page.url
    expect(page.locator("#seq-step-said")).to_have_text("4 of 4: “(”")
    page.locator("#seq-step").focus()
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#seq-step-said")).to_have_text("2 of 4: “(”")
    expect(page.locator("#seq-step-read")).to_contain_text("the network reads 2 with probability")
    assert page.evaluate("document.activeElement.id") == "seq-step"  # the step view changed, the slider stayed
    expect(page.locator('#seq-step-view [data-key="cell"] .bar-row')).to_have_count(8)
    assert "seq_step=2" in page.url  # a link (or a reload) shows the same step again
    page.goto(page.url)
    expect(page.locator("#seq-step-said")).to_have_text("2 of 4: “(”", timeout=60_000)
    expect(page.locator("#seq-step")).to_have_value("2")
    text.focus()
    page.keyboard.press("End")
    page.keyboard.type("x")
    expect(page.locator("#lab-status")).to_have_text("“x” is not a token: type ( or ).")
    page.keyboard.press("Backspace")
    page.get_by_role("button", name="Add )").click()
    expect(page.locator("#lab-status")).to_contain_text("Read 5 tokens, 5 of them right")
    expect(text).to_have_value("(()()")
    assert "seq_step=" not in page.url  # another sequence: its last step, as any new run opens
    text.fill("())")  # it closes a bracket it never opened: read all the same, with no true answer to hold it to
    expect(page.locator("#lab-status")).to_contain_text("Read 3 tokens; the recipe knows no true answer")
    expect(page.locator("#lab-results .trace-table thead th")).to_have_count(4)  # no column of true answers


def test_the_recurrent_lab_at_375px_fits_and_its_longest_case_scrolls_in_its_boxes(watched):
    page = watched("/models/lstm", PHONE)
    lab_ready(page)
    page.locator('[data-preset="longer"]').click()
    expect(page.locator("#record-check")).to_contain_text("31 tokens, longer than any training string")
    expect(page.locator("#lab-results .trace-table tbody tr")).to_have_count(31)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert small_text(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / "lstm-lab-phone.png")


def test_the_seq2seq_lab_is_typed_and_stepped_with_the_keyboard(watched):
    page = watched("/models/transformer")
    lab_ready(page)
    text = page.locator("#seq-text")
    text.focus()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    expect(page.locator("#lab-status")).to_have_text("Type a source to start.")
    typed = [9, 0, 2, 1, 0]
    with page.expect_request(lambda r: r.url.endswith("/runs") and json.loads(r.post_data)["source"] == typed):
        page.keyboard.type("90210")
    expect(page.locator("#lab-status")).to_contain_text("Wrote 0 1 2 0 9 </s> in 6 steps, exactly the true answer")
    assert "source=9%2C0%2C2%2C1%2C0" in page.url
    expect(page.locator("#seq-step-said")).to_have_text("6 of 6: read “9”")
    page.locator("#seq-step").focus()
    page.keyboard.press("Home")
    expect(page.locator("#seq-step-said")).to_have_text("1 of 6: read “<s>”")
    expect(page.locator("#seq-step-read")).to_contain_text("Step 1 read “<s>” and wrote “0” with probability")
    assert page.evaluate("document.activeElement.id") == "seq-step"  # the step view changed, the slider stayed
    # Each cross-attention row of the step is drawn over the five source digits.
    expect(page.locator('#seq-step-view [data-key="cross_attention_l1_h0"] .bar-row')).to_have_count(5)
    expect(page.locator("#lab-results .lab-heatmap")).to_have_count(12)  # 3 attentions × 2 layers × 2 heads
    text.focus()
    page.keyboard.press("End")
    page.keyboard.type("x")
    expect(page.locator("#lab-status")).to_have_text("“x” is not a token: type one of 0 1 2 3 4 5 6 7 8 9.")
    page.keyboard.press("Backspace")
    text.fill("2718281828")  # longer than any trained source: written wrong, and the page says so
    expect(page.locator("#lab-status")).to_contain_text(
        "Wrote 2 8 1 8 2 8 7 2 </s> in 9 steps; the true answer is 8 2 8 1 8 2 8 1 7 2 </s>")
    expect(page.locator("#lab-results .trace-table")).to_contain_text("✗ wrong")


def test_the_seq2seq_lab_at_375px_fits(watched):
    page = watched("/models/transformer", PHONE)
    lab_ready(page)
    page.locator('[data-preset="eight"]').click()
    expect(page.locator("#record-check")).to_contain_text("31415926")
    expect(page.locator("#lab-results .trace-table tbody tr")).to_have_count(9)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert small_text(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / "transformer-lab-phone.png")


def test_a_causal_trace_shows_the_masked_keys_at_a_position_before_the_last(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.locator('input[name="attention"][value="causal"]').check()
    page.get_by_role("button", name="Trace position 2").first.click()
    expect(page.locator("#trace-title")).to_have_text("Trace of position 2 (MASK (3)), causal attention")
    scores = page.locator('[data-stage="attention"] .trace-table').first.locator("tbody tr").first
    expect(scores.locator("td").nth(3)).to_have_text("masked")  # keys 3, 4 and 5 come after position 2
    expect(scores.locator("td").nth(5)).to_have_text("masked")
    expect(scores.locator("td").nth(2)).not_to_have_text("masked")


@pytest.mark.parametrize(("path", "label"), [
    ("/models/gpt?case=repeats", "7 0 7 7 = 0 7 7 7"),
    ("/models/lenet?case=misread", "Test digit 345: a 2, misread as 3"),
    ("/models/bert?case=mask-b", None),
])
def test_the_lab_starts_from_the_case_the_page_names(watched, path, label):
    page = watched(path)
    case_id = path.split("=")[1]
    expect(page.locator("#record-check")).to_contain_text("reproduces the recorded case", timeout=120_000)
    recorded = label or page.locator(f'#lab [data-preset="{case_id}"]').inner_text()
    expect(page.locator("#record-check")).to_contain_text(f"“{recorded}”")  # that case, not the first one


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


# ---- axe-core: no serious or critical violation, as loaded and with the lab, a report and a node's source open

AXE = PROJECT_ROOT / "tests" / "vendor" / "axe.min.js"  # axe-core 4.14.1 from the npm registry (MPL-2.0)


def axe_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it stands, one line each."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))  # the page's CSP forbids this; the test's context bypasses it
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes'][:3]]}"
            for v in result["violations"] if v["impact"] in ("serious", "critical")]


def open_node_source(page, node: str) -> None:
    page.locator('[data-open-all="true"]').click()  # the page opens at block level; the node may be inside a module
    page.locator(f'#graph-stage .g-node[data-id="{node}"]').focus()  # wherever the view is: by keyboard
    page.keyboard.press("Enter")
    expect(page.locator("#node-details pre.source").first).to_be_visible()


def bert_interactions(page):
    page.locator("[data-trace]").first.click()
    expect(page.locator("#trace .trace-vector").first).to_be_visible(timeout=60_000)
    page.locator("#reverify").click()
    expect(page.locator("#verify-report details").first).to_be_visible(timeout=120_000)
    open_node_source(page, "encoder.up")


def gpt_interactions(page):
    page.locator("#generate").click()
    expect(page.locator(".generation-step").first).to_be_visible(timeout=60_000)
    page.locator('[data-trace="1"]').click()
    expect(page.locator("#trace-title")).to_contain_text("position 1", timeout=60_000)
    open_node_source(page, "wte")
    page.locator("#whatif-add").click()  # zero the selected node's output
    expect(page.locator("#whatif-results table").first).to_be_visible(timeout=60_000)


def lenet_interactions(page):
    page.locator("#trace-class").click()
    expect(page.locator("#trace .trace-table").first).to_be_visible(timeout=60_000)
    open_node_source(page, "fc1")
    page.locator("#training-run").click()
    expect(page.locator("#training-results table").first).to_be_visible(timeout=60_000)


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


def sequence_interactions(page):
    """A lab read step by step (recurrent, seq2seq): its first step, then its last recorded case."""
    page.locator("#seq-step").focus()
    page.keyboard.press("Home")
    expect(page.locator("#seq-step-said")).to_contain_text("1 of")
    last = page.locator("#lab [data-preset]").last
    last.click()
    expect(page.locator("#record-check")).to_contain_text(last.inner_text())


# What each model's page offers a reader to open, by slug, else by its lab's kind: each adds to the page (a trace,
# a report, a node's source) or shows the same parts again for another input (a step-by-step lab's last case), so
# a check after all of them sees every kind of part each showed. Every other model of the
# catalog is checked as loaded (the DataLab, which needs a checkpoint, also after a trace, in
# test_browser_datalab.py's test_axe_finds_none_on_the_catalog_and_the_datalab).
INTERACTIONS = {"bert": bert_interactions, "gpt": gpt_interactions, "lenet": lenet_interactions}
KIND_INTERACTIONS = {"recurrent": sequence_interactions, "seq2seq": sequence_interactions}


# ---- every model page: it holds still as it loads, and axe finds nothing serious in any state

LAYOUT_SHIFT = """window.layoutShift = 0;
new PerformanceObserver((entries) => {
  for (const e of entries.getEntries()) if (!e.hadRecentInput) window.layoutShift += e.value;
}).observe({ type: "layout-shift", buffered: true });"""


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_page_holds_still_as_it_loads_and_axe_finds_no_serious_or_critical_violation(watched, slug, viewport):
    """At both widths, one page load each: laid out for its scripts from the first paint (cumulative layout
    shift under 0.1 once the graph, the lab and the network have settled); no serious or critical axe violation
    as loaded (on a desktop) and after every interaction the page offers (at both widths: on a phone, where
    wide results must scroll in focusable boxes), and on a phone no text under 12 px and no small control
    under 24 px, and the page at most 8,000 px tall as loaded."""
    interact = INTERACTIONS.get(slug) or KIND_INTERACTIONS.get(lab_kind(slug))
    page = watched(f"/models/{slug}", viewport, init_script=LAYOUT_SHIFT, bypass_csp=True)
    graph_ready(page)
    expect(page.locator("#lab[data-ready]")).to_have_count(1 if lab_kind(slug) else 0)  # a model may have none
    manifest = json.loads((PROJECT_ROOT / "manifests" / slug / "manifest.json").read_text())
    if any(layer["kind"] == "module" for layer in manifest["layers"]):  # a graph of leaves alone has no toggles
        expect(page.locator("#module-toggles button").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.layoutShift") < 0.1
    if viewport is PHONE:  # the graph's first view is readable: its labels at 11 px or more
        assert 11 <= smallest_graph_label(page) < math.inf
        if slug in RECORDED_LAB_SLUGS:
            lab_ready(page)  # as loaded, the lab's first answer drawn: the page at most 8,000 px tall
        assert page.evaluate("document.documentElement.scrollHeight") <= 8_000
    found = {}
    if interact:
        lab_ready(page)
        if viewport is DESKTOP:
            found["loaded"] = axe_violations(page)
        interact(page)
    found["shown"] = axe_violations(page) + (small_text(page) if viewport is PHONE else [])
    assert found == {name: [] for name in found}
    if viewport is PHONE and slug in RECORDED_LAB_SLUGS:
        lab_ready(page)
        assert small_controls(page) == []


def small_controls(page) -> list:
    """Radio buttons, checkboxes, export links and link buttons on show that are under 24 px either way (a phone's
    smallest comfortable target), with their markup; failing unless there are some to measure."""
    controls = page.locator('#main input[type="radio"]:visible, #main input[type="checkbox"]:visible, '
                            "#main .exports a:visible, #main .link-button:visible")
    assert controls.count() >= 3
    return [(c.evaluate("e => e.outerHTML.slice(0, 80)"), box) for c in controls.all()
            if (box := c.bounding_box()) and (box["width"] < 24 or box["height"] < 24)]


# ---- keyboard focus stays on (or returns to) the control the user pressed


def test_focus_stays_on_the_control_after_each_action(watched):
    page = watched("/models/bert?step=bidirectional")
    graph_ready(page)
    lab_ready(page)
    toggle = page.locator('#module-toggles button[data-module="encoder"]')
    toggle.focus()
    page.keyboard.press("Enter")
    expect(page.locator('#module-toggles button[data-module="encoder"]')).to_have_attribute("aria-pressed", "false")
    expect(page.locator('#module-toggles button[data-module="encoder"]')).to_be_focused()
    for control in ('[data-mask="2"]', '[data-segment="3"]'):
        page.locator(f"#token-strip {control}").focus()
        page.keyboard.press("Enter")
        expect(page.locator(f"#token-strip {control}")).to_be_focused()
    token = page.locator('#token-strip select[data-position="1"]')
    before = token.input_value()
    token.focus()
    page.keyboard.press("ArrowDown")
    expect(page.locator('#token-strip select[data-position="1"]')).not_to_have_value(before)
    expect(page.locator('#token-strip select[data-position="1"]')).to_be_focused()
    page.locator('#module-toggles button[data-module="encoder"]').click()  # open the encoder again
    page.locator('#module-toggles button[data-module="encoder.attention"]').click()  # and close its attention
    page.locator('#graph-stage .g-node[data-id="encoder.attention"]').click()
    expand = page.locator('#node-details button[data-toggle="encoder.attention"]')
    expand.focus()
    page.keyboard.press("Enter")
    expect(page.locator('#node-details button[data-toggle="encoder.attention"]')).to_have_text(
        re.compile(r"^(Open|Close) encoder\.attention$"))
    expect(page.locator('#node-details button[data-toggle="encoder.attention"]')).to_be_focused()
    page.locator('[data-tour="prev"]').focus()
    while not page.locator("#tour-position").inner_text().startswith("Step 1 of"):
        page.keyboard.press("Enter")  # at the first step Previous is disabled: the focus moves to Next
    expect(page.locator('[data-tour="next"]')).to_be_focused()
    page.locator("#reverify").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#verify-status")).to_contain_text("Done in", timeout=120_000)
    expect(page.locator("#reverify")).to_be_focused()


def test_a_node_tapped_at_375px_shows_its_details_in_view(watched):
    page = watched("/models/bert?step=bidirectional", PHONE, has_touch=True, is_mobile=True, reduced_motion="reduce")
    graph_ready(page)
    page.locator('#graph-stage .g-node[data-id="encoder.attention.softmax"]').tap()
    details = page.locator("#node-details")
    expect(details.locator("h3")).to_have_text("encoder.attention.softmax")
    box = details.bounding_box()
    assert box["y"] < PHONE["height"] and box["y"] + min(box["height"], 200) > 0  # its top part is on screen
    assert box["y"] >= -1


def test_the_trace_follows_an_edit_and_unscoring_everything_clears_the_results(watched):
    page = watched("/models/bert")
    lab_ready(page)
    page.get_by_role("button", name="Trace position 2").click()
    expect(page.locator("#trace-title")).to_contain_text("Trace of position 2")
    tokens = page.locator('[data-stage="tokens"]')
    expect(tokens).to_contain_text("4")
    page.locator('select[data-position="4"]').select_option("9")  # the trace is of the earlier tokens now
    expect(page.locator("#lab-status")).to_contain_text("Trace of position 2 updated")
    expect(page.locator("#trace")).not_to_have_class(re.compile("is-stale"))
    expect(page.locator("#trace .stale-note")).to_have_count(0)
    expect(page.locator('[data-stage="tokens"]')).to_contain_text("9")
    page.locator("#compare-mode").check()
    expect(page.locator("#attention-choice input").first).to_be_disabled()  # both attentions run: no choice applies
    page.locator("#compare-mode").uncheck()
    expect(page.locator("#attention-choice input").first).to_be_enabled()
    page.locator('[data-mask="2"]').click()  # un-score the one scored position
    expect(page.locator("#lab-status")).to_contain_text("Choose at least one position to score")
    expect(page.locator("#lab-results")).to_be_empty()
    expect(page.locator("#trace")).to_be_empty()


def test_the_graph_is_one_tab_stop_and_arrow_keys_walk_it_in_view(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    expect(page.locator('#graph-stage .g-node[tabindex="0"]')).to_have_count(1)
    page.locator("[data-export-graph]").focus()
    tabs = 0
    while not page.evaluate("document.activeElement.classList.contains('g-node')"):
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


@pytest.mark.parametrize("path", [f"/models/{slug}" for slug in RECORDED_LAB_SLUGS])
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
    expect(page.locator('#graph-stage .g-node[data-id="h.1"]')).to_contain_text("Block")  # closed: its class
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


def test_a_large_open_graph_draws_what_is_near_the_view_and_the_keyboard_walks_all_of_it(watched):
    page = watched("/models/gpt2")  # gpt2 small's twelve blocks
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
    page.locator('#graph-stage .g-node[data-id="input"]').focus()
    page.keyboard.press("Enter")
    details = page.locator("#node-details")
    expect(details).to_contain_text("shape=1,5,16")  # what the original capture's graph holds
    expect(details).to_contain_text("recorded with1,6 int64; 1,6 int64")  # what its cases ran on


def test_a_drag_from_a_node_pans_and_a_click_still_selects(watched):
    page = watched("/models/bert?step=bidirectional")
    graph_ready(page)
    settled(page)
    viewport = page.locator("#graph-stage .viewport")
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


def test_live_bars_are_drawn_from_the_same_markup_as_recorded_ones(watched):
    page = watched("/models/bert")
    lab_ready(page)
    shape = """(row) => [...row.querySelectorAll('*')].map((e) =>
      `${e.tagName.toLowerCase()}.${e.getAttribute('class')}`
      + `[${['viewBox', 'preserveAspectRatio', 'aria-hidden', 'height'].map((a) => e.getAttribute(a)).join()}]`)"""
    recorded = page.locator("#case-panel .bar-row").first.evaluate(shape)
    live = page.locator("#lab-results .bar-row").first.evaluate(shape)
    normalise = [re.sub(r"\[0 0 [\d.e-]+ 10,", "[0 0 max 10,", s) for s in recorded]
    assert [re.sub(r"\[0 0 [\d.e-]+ 10,", "[0 0 max 10,", s) for s in live] == normalise
    # Metrics and chips too: the same elements and classes in a recorded case and in a live run.
    outline = "(e) => [e, ...e.querySelectorAll('*')].map((n) => `${n.tagName}.${n.className}`).join(' ')"
    assert page.locator("#case-panel .metric").first.evaluate(outline) == \
        page.locator("#lab-results .metric").first.evaluate(outline)
    assert page.locator("#case-panel .chip").first.evaluate(outline) == \
        page.locator("#lab-results .prediction-chips .chip").first.evaluate(outline) == "LI.chip chip-token"


SIG_VALUES = [1.2345e-7, -1.2345e-7, 5.6257e-5, 0.2461, 1234567.0, 1.5e22, 3.0, 0.1, 1e-6, 9.99999e-7, -0.000012345,
              123.456, 7.0e-12, 0.00005626, -42.0, 0.999995, 1.227e-14, 1e-4, 9.99996e-5, 0.00012345, 1.5e-300]


def test_the_browser_rounds_numbers_as_the_server_does(watched):
    """One rule for significant figures: the page's sig() writes what the server's filter writes, positional down
    to 1e-4 and scientific below it (1.2e-14, never 0.000000000000012)."""
    from app.web.pages import significant

    page = watched("/models/bert")
    graph_ready(page)
    charts = page.evaluate("""async (values) => {
        const src = document.querySelector('script[type="module"]').src.replace(/model-page\\.js$/, "charts.js");
        const { sig } = await import(src);
        return values.map((v) => sig(v));
    }""", SIG_VALUES)
    assert charts == [significant(v) for v in SIG_VALUES]


def effects(page) -> dict[str, float]:
    """Each graph node's shade, as the page wrote it: how much its output moved."""
    return {id_: float(v) for id_, v in page.eval_on_selector_all(
        "#graph-stage .g-node[data-effect]", "ns => ns.map((n) => [n.dataset.id, n.dataset.effect])")}


def test_what_if_a_module_is_zeroed_or_scaled_chosen_from_the_graph_by_keyboard(watched):
    """Select a node, choose a change, run: the graph shades what moved, the items show before and after, the
    changes stack and come off one by one, and the URL holds them."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    panel = page.locator("#whatif")
    page.locator('#graph-stage .g-node[data-id="add@GPT#0"]').focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-node")).to_contain_text("is an op: select a module")
    expect(panel.locator("#whatif-add")).to_be_disabled()
    page.locator('#graph-stage .g-node[data-id="h.0.mlp"]').focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-node")).to_have_text("h.0.mlp")
    panel.locator("#whatif-action").select_option("zero")
    expect(panel.locator("#whatif-add")).to_be_enabled()  # once the server said what h.0.mlp can do here
    panel.locator("#whatif-add").focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    shades = effects(page)
    assert shades["h.0.mlp"] == 1 and shades["lm_head"] > 0 and shades["wte"] == 0
    expect(page.locator('#whatif-results tr[data-item="next_token_probs"]')).to_be_visible()
    bars = page.locator("#whatif-results .whatif-bars figcaption")
    expect(bars.filter(has_text="Token IDs")).to_have_count(0)  # an input
    expect(bars.filter(has_text="Next-token loss")).to_have_count(1)
    assert "whatif=" in page.url and "h.0.mlp" in unquote(page.url)
    page.locator('#graph-stage .g-node[data-id="ln_f"]').focus()
    page.keyboard.press("Enter")
    panel.locator("#whatif-action").select_option("scale")
    expect(panel.locator("#whatif-factor")).to_be_visible()
    panel.locator("#whatif-factor").fill("3")
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-list li")).to_have_count(2)
    expect(panel.locator("#whatif-list li").nth(1)).to_contain_text("scale ln_f × 3")
    panel.get_by_role("button", name="Remove: zero h.0.mlp").click()
    expect(panel.locator("#whatif-list li")).to_have_count(1)
    expect(page.locator('#graph-stage .g-node[data-id="h.0.mlp"]')).to_have_attribute("data-effect", "0",
                                                                                     timeout=60_000)
    panel.get_by_role("button", name="Remove: scale ln_f × 3").click()
    expect(panel.locator("#whatif-status")).to_contain_text("No change")
    assert effects(page) == {} and "whatif=" not in page.url


def test_what_if_offers_only_the_changes_that_run_on_the_case_shown(watched):
    """The panel asks the server what each node can do on the case shown: a node the run never calls offers
    nothing and says why, an action a node cannot take is disabled with its reason, a patch comes from another case
    that runs the node alike, an open module is selected by its box, and one button adds a change and runs."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    panel = page.locator("#whatif")
    expect(panel.locator("#whatif-run")).to_have_count(0)
    box = page.locator('#graph-stage .g-cluster[data-id="h"] > rect').bounding_box()  # h is open: a box
    stage = page.locator("#graph-stage").bounding_box()
    page.mouse.click(max(box["x"], stage["x"]) + 5, max(box["y"], stage["y"]) + 26)  # inside it, below its title
    expect(panel.locator("#whatif-node")).to_have_text("h")
    expect(panel.locator("#whatif-why")).to_contain_text("Nothing to change here: this input's run gets no output")
    expect(panel.locator("#whatif-add")).to_be_disabled()
    page.locator('#graph-stage .g-node[data-id="wpe"]').focus()
    page.keyboard.press("Enter")
    expect(panel.locator('#whatif-action option[value="mean"]')).to_be_disabled()
    expect(panel.locator("#whatif-why")).to_contain_text("mean: mean averages over positions, and wpe's output has "
                                                         "shape [8, 32]")
    page.locator('#graph-stage .g-node[data-id="h.0.mlp"]').focus()
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Select h.0, the module around h.0.mlp").focus()  # by keyboard, from inside
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-node")).to_have_text("h.0")
    expect(page.locator('#graph-stage .g-cluster[data-id="h.0"]')).to_have_class(re.compile("is-selected"))
    page.locator('#graph-stage .g-node[data-id="h.0.mlp"]').focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-why")).to_be_hidden()
    panel.locator("#whatif-action").select_option("patch")
    expect(panel.locator("#whatif-source")).to_have_value("repeats")  # not the case shown
    expect(panel.locator('#whatif-source option[value="pi"]')).to_be_disabled()
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.locator("#whatif-list li")).to_have_text([re.compile("patch h.0.mlp from “repeats”")])
    assert effects(page)["h.0.mlp"] > 0


def test_what_if_tells_the_outcome_first_and_folds_what_did_not_move(watched):
    """The answer opens with the recorded numbers that changed, in words; the items that moved follow, most first;
    the unchanged ones (the input image among them) are folded away, and no vector that did not move is drawn."""
    changes = '[{"node":"blocks.1","action":"zero"}]'
    page = watched(f"/models/vit?whatif={quote(changes)}")
    graph_ready(page)
    results = page.locator("#whatif-results")
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(results.locator(".whatif-outcome")).to_have_text(re.compile(
        r"^With these changes, Read as goes from 0 to 8; Probability of the digit read goes from 0\.9992 to 0\.1181; "
        r"Cross entropy against the true digit goes from 0\.0007571 to 2\.507\.$"))
    moved = results.locator("table").first.locator("tbody tr")
    changes_read = [float(text) for text in moved.locator("td:nth-child(4)").all_inner_texts()]
    assert changes_read and all(change > 0 for change in changes_read)
    unchanged = results.locator("details.whatif-unchanged")
    expect(unchanged.locator("summary")).to_contain_text("unchanged (the inputs among them)")
    expect(unchanged.locator('tr[data-item="image"]')).to_be_hidden()  # folded
    unchanged.locator("summary").click()
    expect(unchanged.locator('tr[data-item="image"]')).to_be_visible()
    expect(unchanged.locator('tr[data-item="label"]')).to_be_visible()
    # Block 1's own attention is computed before its output is zeroed: that vector did not move, and is not drawn.
    expect(unchanged.locator('tr[data-item="cls_to_itself"]')).to_be_visible()
    expect(results.locator(".whatif-bars figcaption")).to_have_text(
        ["Logits (digits 0-9): before and after", "Class probabilities (digits 0-9): before and after"])
    # The answer has the page's width below the graph, not the side column's, and no table in it is clipped.
    side, wide = (page.locator(s).bounding_box()["width"] for s in ("#whatif", "#whatif-results"))
    assert wide > 2 * side
    clipped = results.locator(".table-wrap").evaluate_all(
        "boxes => boxes.filter((b) => b.scrollWidth > b.clientWidth + 1).length")
    assert clipped == 0


def test_a_what_if_link_shows_the_same_changes_on_a_phone(watched):
    changes = '[{"node":"h.1.attn","action":"zero","head":1},{"node":"h.0.mlp","action":"patch","from_case":"pi"}]'
    page = watched(f"/models/gpt?case=repeats&step=causal&whatif={quote(changes)}", PHONE)
    graph_ready(page)
    panel = page.locator("#whatif")
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.locator("#whatif-list li")).to_have_text([re.compile("zero h.1.attn head 1"),
                                                            re.compile("patch h.0.mlp from “pi”")])
    assert effects(page)["h.1"] > 0  # h.1 is closed: its box stands for h.1.attn and shades by its output
    expect(page.locator("#whatif-results caption").first).to_contain_text("“repeats”: what the changes moved")
    assert small_text(page) == []


@pytest.mark.parametrize("slug", TRAINED)
def test_what_training_changed_steps_through_the_stages_and_a_link_keeps_the_view(watched, live_server, slug):
    """Run the case on every stage (keyboard): the graph shades each module as the API measured it, the first
    stage moves nothing, the choice lives in the URL and a reload shows it again; nothing under 12 px on a phone."""
    page = watched(f"/models/{slug}")
    graph_ready(page)
    panel = page.locator("#training")
    panel.locator("#training-run").focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#training-status")).to_contain_text("Done", timeout=60_000)
    case = page.evaluate("document.getElementById('model-page').dataset.case")
    request = urllib.request.Request(f"{live_server}/api/models/{slug}/training", method="POST",
                                     data=json.dumps({"case": case}).encode(),
                                     headers={"Content-Type": "application/json"})
    stages = json.load(urllib.request.urlopen(request))["stages"]
    # The outcome first: the case's numbers that training changed, initialisation against the trained weights;
    # nothing the same at every stage (an input's token ids) drawn as bars.
    expect(page.locator("#training-results .training-outcome")).to_have_text(re.compile(
        rf"^What training changed, {re.escape(stages[0]['label'].lower())} → as trained: .+ → .+\.$"))
    for bars in panel.locator(".training-bars").all():
        key = bars.get_attribute("data-item")
        assert len({json.dumps(stage["values"][key]) for stage in stages}) > 1, key
    shades = effects(page)
    assert shades and all(shades[node] == pytest.approx(stages[-1]["weights"][node], rel=1e-2) for node in shades)
    start = stages[0]["id"]
    first = page.locator(f'#training-results input[name="training-stage"][value="{start}"]')
    first.focus()
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    expect(page.locator("#training-results caption").nth(1)).to_contain_text(stages[0]["label"])
    assert set(effects(page).values()) == {0.0}
    panel.get_by_label("output on this case moved").check()
    expect(page.locator("#training-results tbody tr").first).to_have_attribute("data-stage", start)
    assert f"training={start}" in page.url and "moved=activations" in page.url
    phone = watched(page.url.removeprefix(live_server), PHONE)
    graph_ready(phone)
    expect(phone.locator("#training-status")).to_contain_text("Done", timeout=60_000)
    expect(phone.locator(f'input[name="training-stage"][value="{start}"]')).to_be_checked()
    expect(phone.locator('input[name="training-moved"][value="activations"]')).to_be_checked()
    assert small_text(phone) == []


def test_what_if_runs_on_the_drawing_in_the_lab_and_a_link_keeps_it(watched):
    """The image lab: the changes run on the lab's input (the drawing the lab last read), the digit's
    probabilities before and after side by side; the choice and the drawing live in the URL."""
    page = watched("/models/lenet?step=convolve")
    graph_ready(page)
    lab_ready(page)
    grid_cell(page, 3, 3).focus()
    page.keyboard.press("Space")  # ink one more cell: the lab reads a drawing no case recorded
    expect(page.locator("#lab-status")).to_contain_text("Read as", timeout=60_000)
    panel = page.locator("#whatif")
    panel.get_by_label("your input in the lab").check()
    page.locator('#graph-stage .g-node[data-id="fc1"]').focus()
    page.keyboard.press("Enter")
    panel.locator("#whatif-action").select_option("zero")
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(page.locator("#whatif-results caption").first).to_contain_text("Your lab input: what the changes moved")
    expect(page.locator('#whatif-results tr[data-item="confidence"]')).to_be_visible()
    expect(page.locator("#whatif-results .whatif-bars figcaption").filter(has_text="probabilit")).to_have_count(1)
    shades = effects(page)
    assert shades["fc1"] == 1 and shades["fc2"] > 0 and shades["stage1.conv"] == 0  # stage1 opens with the step
    assert "whatif_on=lab" in page.url and "drawing=" in page.url
    page.goto(page.url)
    graph_ready(page)
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.get_by_label("your input in the lab")).to_be_checked()
    expect(page.locator("#whatif-results caption").first).to_contain_text("Your lab input: what the changes moved")
    assert effects(page)["fc1"] == 1


def test_the_open_modules_and_the_selected_node_live_in_the_url(watched):
    """A link reproduces the graph's view: the modules open and the node whose details (and What if? module)
    are shown."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    page.locator('#module-toggles [data-module="h.1"]').click()
    expect(page.locator('#module-toggles [data-module="h.1"]')).to_have_attribute("aria-pressed", "true")
    page.locator('#graph-stage .g-node[data-id="h.1.mlp"]').focus()
    page.keyboard.press("Enter")
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


def curve_points(page) -> int:
    """How many epochs the first live loss curve holds now."""
    return page.locator("#retrain-curves svg polyline").first.evaluate(
        "line => line.getAttribute('points').trim().split(' ').filter(Boolean).length")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_retraining_draws_the_curves_as_the_model_learns(watched, viewport):
    """At 1280 px, LeNet retrained to its end: the loss and test accuracy drawn as they grow, then the verdict and
    every tensor; at 375 px, the ResNet's curve seen growing, nothing wider than the screen, then cancelled."""
    desktop = viewport is DESKTOP
    page = watched(f"/models/{'lenet' if desktop else 'resnet'}", viewport, bypass_csp=True)  # axe
    graph_ready(page)
    page.get_by_role("button", name="Retrain on the server").press("Enter")
    status = page.locator("#retrain-status")
    expect(status).to_contain_text(re.compile(r"Training… epoch \d+ of (50|30)"), timeout=60_000)
    expect(page.locator("#retrain-curves svg")).to_have_count(2)  # the loss, and the test accuracy
    first = curve_points(page)
    for _ in range(100):
        if curve_points(page) > first or page.locator("#retrain-headline").count():
            break
        page.wait_for_timeout(100)
    assert curve_points(page) > first, "the curve did not grow"
    expect(page.locator("#retrain-curves svg").first).to_have_attribute("aria-label",
                                                                     re.compile(r"^Training loss, epoch by epoch"))
    if desktop:
        headline = page.locator("#retrain-headline")
        expect(headline).to_contain_text("The weights came out the same", timeout=120_000)
        expect(headline).to_contain_text("test accuracy 0.9806 on 360 held-out digits")
        expect(page.locator("#retrain-tensors tbody tr")).to_have_count(40)  # 8 trained, 32 kept on the way
        expect(page.locator("#retrain-figures")).to_contain_text("test accuracy")
        expect(page.locator("#retraining .report-env")).to_contain_text("AVX2")
        assert curve_points(page) == 50
        assert axe_violations(page) == []
    else:
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator("#retrain-headline")).to_have_text(re.compile(r"^Cancelled"), timeout=30_000)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert small_text(page) == []


def test_the_verification_history_lists_the_environment_after_a_reverification(watched):
    page = watched("/models/mlp", PHONE)
    expect(page.locator("#verify-history-table")).to_contain_text(re.compile(r"Not verified yet|this server"))
    page.get_by_role("button", name="Re-verify on the server").press("Enter")
    expect(page.locator("#report-headline")).to_contain_text("Passed", timeout=60_000)
    row = page.locator("#history-environments tbody tr").first
    expect(row).to_contain_text("this server")
    expect(row.locator("th")).to_contain_text("torch 2.")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
