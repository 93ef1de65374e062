"""The live labs of the text models (BERT's masked-LM lab, GPT's causal-LM lab) in a real browser: edits, compare mode,
traces, heatmaps, and a busy server."""

import re
import threading
import time

import pytest
from playwright.sync_api import expect
from werkzeug.serving import make_server

from app.services.config import TestConfig
from app.services.parts import parts

from .browsing import ARTIFACTS, DESKTOP, PHONE
from .page_checks import graph_ready, grid_cell, lab_ready, small_text

pytestmark = pytest.mark.browser


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


def test_the_lab_waits_and_retries_when_the_server_is_busy(make_app, browser):
    app = make_app(type("Busy", (TestConfig,), {"RECIPE_WORKERS": 1, "RECIPE_QUEUE": 0}))
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


def test_gpt_s_next_token_distribution_is_redrawn_as_temperature_and_top_k_move(watched):
    """Before anything is sampled, the distribution a step would draw from follows the controls: a higher temperature
    flattens it, top-k keeps the k likeliest (each answer the recipe's own, one step asked of the server)."""
    page = watched("/models/gpt")
    lab_ready(page)
    preview = page.locator("#gen-preview")
    caption = preview.locator("figcaption")
    expect(caption).to_have_text("The next token as it would be drawn (temperature 1, every token): greedy takes “4”",
                                 timeout=60_000)
    first = lambda: float(preview.locator(".bar-value").first.get_attribute("title"))  # noqa: E731
    cold = first()
    page.locator("#gen-temperature").fill("4")
    expect(caption).to_contain_text("temperature 4, every token", timeout=30_000)
    assert first() < cold  # flatter
    page.locator("#gen-top-k").fill("2")
    expect(caption).to_contain_text("temperature 4, the 2 likeliest only", timeout=30_000)
    values = [float(v) for v in preview.locator(".bar-value").evaluate_all("els => els.map(e => e.title)")]
    assert values[2:] == [0] * (len(values) - 2) and sum(values[:2]) == pytest.approx(1, abs=1e-3)
    page.get_by_label("sample").check()
    expect(caption).to_contain_text("sampling draws from these", timeout=30_000)
    page.locator("#gen-temperature").fill("9")
    expect(preview).to_have_text("The temperature must be from 0.05 to 5.")


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
    expect(bert.locator("#lab-status")).to_contain_text("Filled in")
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
    expect(page.locator("#lab-status")).to_contain_text("it answered", timeout=30_000)
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

