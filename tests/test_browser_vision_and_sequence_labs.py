"""The labs of the vision and sequence kinds in a real browser: a digit drawn with the mouse, the keyboard and by touch,
feature maps, the autoencoder's code, and the recurrent and seq2seq labs stepped with the keyboard."""

import json
import re

import pytest
import torch
from playwright.sync_api import expect

from .browsing import ARTIFACTS, PHONE
from .conftest import LENET_RECIPE, RECORDED_LAB_SLUGS, recipe_module
from .page_checks import (
    graph_ready,
    grid_cell,
    lab_kind,
    lab_ready,
    small_text,
    stroke,
)

pytestmark = pytest.mark.browser


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
    # The first figure shown (the drawing, ink on paper), the rest folded: every stage's maps among them.
    expect(page.locator("#case-panel > .image-figure svg rect").first).to_be_visible()
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
    expect(page.locator("#lab-status")).to_contain_text("came back looking most like a “")
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
    expect(page).not_to_have_url(re.compile(r"[?&]code="))


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


def emptied(page):
    """A sequence lab's text box, emptied with the keyboard (its run is cleared): the box, focused."""
    text = page.locator("#seq-text")
    text.focus()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    return text


def test_the_recurrent_lab_is_typed_and_stepped_with_the_keyboard(watched):
    page = watched("/models/lstm")
    lab_ready(page)
    text = emptied(page)
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
    expect(page.locator("#lab-status")).to_have_text("“x” is not one of the tokens: type ( or ).")
    page.keyboard.press("Backspace")
    page.get_by_role("button", name="Add )").click()
    expect(page.locator("#lab-status")).to_contain_text("Read 5 tokens, 5 of them right")
    expect(text).to_have_value("(()()")
    assert "seq_step=" not in page.url  # another sequence: its last step, as any new run opens
    text.fill("())")  # it closes a bracket it never opened: read all the same, with no true answer to hold it to
    expect(page.locator("#lab-status")).to_contain_text("Read 3 tokens; there is no right answer for this sequence.")
    expect(page.locator("#lab-results .trace-table thead th")).to_have_count(4)  # no column of true answers


@pytest.mark.parametrize(("slug", "preset", "said", "rows"), [
    ("lstm", "longer", "31 tokens, longer than any training string", 31),  # the recurrent lab's longest case
    ("transformer", "eight", "31415926", 9),  # the seq2seq lab's
])
def test_a_sequence_lab_at_375px_fits_and_its_longest_case_scrolls_in_its_boxes(watched, slug, preset, said, rows):
    page = watched(f"/models/{slug}", PHONE)
    lab_ready(page)
    page.locator(f'[data-preset="{preset}"]').click()
    expect(page.locator("#record-check")).to_contain_text(said)
    expect(page.locator("#lab-results .trace-table tbody tr")).to_have_count(rows)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert small_text(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / f"{slug}-lab-phone.png")


def test_the_seq2seq_lab_is_typed_and_stepped_with_the_keyboard(watched):
    page = watched("/models/transformer")
    lab_ready(page)
    text = emptied(page)
    expect(page.locator("#lab-status")).to_have_text("Type a source to start.")
    typed = [9, 0, 2, 1, 0]
    with page.expect_request(lambda r: r.url.endswith("/runs") and json.loads(r.post_data)["source"] == typed):
        page.keyboard.type("90210")
    expect(page.locator("#lab-status")).to_contain_text("Wrote “0 1 2 0 9” for “9 0 2 1 0”: right.")
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
    expect(page.locator("#lab-status")).to_have_text("“x” is not one of the tokens: type one of 0 1 2 3 4 5 6 7 8 9.")
    page.keyboard.press("Backspace")
    text.fill("2718281828")  # longer than any trained source: written wrong, and the page says so
    expect(page.locator("#lab-status")).to_contain_text(
        "Wrote “2 8 1 8 2 8 7 2” for “2 7 1 8 2 8 1 8 2 8”: wrong, the right answer is “8 2 8 1 8 2 8 1 7 2”.")
    expect(page.locator("#lab-results .trace-table")).to_contain_text("✗ wrong")
