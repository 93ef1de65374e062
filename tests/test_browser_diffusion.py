"""The diffusion lab in a real browser: a chain sampled from a seed and stepped through with the keyboard, a
drawing noised and denoised back, links that bring either back, and a phone's width; axe after every interaction."""

import json
import re

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import axe_violations, grid_cell, lab_ready, small_text, stroke

pytestmark = pytest.mark.browser

SAMPLE = "/api/models/ddpm/sample"
DENOISE = "/api/models/ddpm/denoise"


def sent(request) -> dict:
    return json.loads(request.post_data)


def no_violations(page, phone: bool = False) -> None:
    assert axe_violations(page) + (small_text(page) if phone else []) == []


def test_a_sampled_chain_is_stepped_through_with_the_keyboard_and_played(watched):
    page = watched("/models/ddpm", bypass_csp=True)
    lab_ready(page)  # the first recorded case, a sample from seed 7, reproduced
    expect(page.locator("#chain-where")).to_have_text("Step 100 of 100: x₀, the end of the chain.")
    expect(page.locator("#chain-strip .chain-frame")).to_have_count(11)
    no_violations(page)
    slider = page.locator("#chain-step")
    slider.focus()
    page.keyboard.press("Home")
    expect(page.locator("#chain-where")).to_contain_text("Step 0 of 100: t = 100. Loss term")
    expect(page.locator("#chain-images figure")).to_have_count(3)  # x_t, the predicted noise, x̂_0
    page.keyboard.press("ArrowRight")
    expect(page.locator("#chain-where")).to_contain_text("Step 1 of 100: t = 99.")
    assert page.evaluate("document.activeElement.id") == "chain-step"
    page.locator("#chain-back").click()
    expect(page.locator("#chain-where")).to_contain_text("Step 0 of 100: t = 100.")
    page.locator('.chain-frame[data-step="50"]').click()
    expect(page.locator("#chain-where")).to_contain_text("Step 50 of 100: t = 50.")
    expect(page.locator('.chain-frame[data-step="50"]')).to_have_attribute("aria-pressed", "true")
    no_violations(page)
    assert "chain_step=50" in page.url  # the step shown is in the link: a reload shows it again
    page.reload()
    lab_ready(page)
    expect(page.locator("#chain-where")).to_contain_text("Step 50 of 100: t = 50.")
    expect(page.locator("#chain-step")).to_have_value("50")
    play = page.locator("#chain-play")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#chain-where")).to_have_text("Step 100 of 100: x₀, the end of the chain.", timeout=20_000)
    expect(play).to_have_attribute("aria-pressed", "false")  # it stops at the end
    assert "chain_step" not in page.url  # the end, where a chain opens, is left out of the link
    # Another seed: the request carries it, the link names it, and the chain is another.
    first = page.locator("#chain-strip .chain-frame").last.inner_html()
    with page.expect_request(lambda r: r.url.endswith(SAMPLE) and sent(r) == {"seed": 8}):
        page.locator("#sample-next").click()
    drew = re.compile(r"Drew a digit that looks most like a “\d” from noise seed 8\.")
    expect(page.locator("#lab-status")).to_contain_text(drew)
    expect(page.locator('[data-preset="sample"]')).to_have_attribute("aria-pressed", "false")
    assert "seed=8" in page.url and page.locator("#chain-strip .chain-frame").last.inner_html() != first
    no_violations(page)


def test_a_drawing_is_noised_to_the_step_chosen_and_denoised_back(watched):
    page = watched("/models/ddpm", bypass_csp=True)
    lab_ready(page)
    page.locator('[data-preset="denoise"]').click()
    expect(page.locator("#record-check")).to_contain_text("“A 3 noised to step 40 and denoised back”")
    expect(page.locator("#record-check")).to_have_class(re.compile("is-passed"))
    expect(page.locator("#chain-where")).to_have_text("Step 40 of 40: x₀, the end of the chain.")
    no_violations(page)
    page.locator("#clear-drawing").click()
    stroke(page, 4, 1, 6)
    start = page.locator("#denoise-start")
    start.focus()
    page.keyboard.press("Home")
    for _ in range(4):
        page.keyboard.press("ArrowRight")
    expect(page.locator("#denoise-start-value")).to_have_text("5")
    page.locator("#denoise-seed").fill("12")
    with page.expect_request(lambda r: r.url.endswith(DENOISE)) as asked:
        page.locator("#denoise-run").click()
    body = sent(asked.value)
    assert body["start"] == 5 and body["noise_seed"] == 12 and [row[4] for row in body["image"]] == [0, 16, 16, 16, 16,
                                                                                                      16, 16, 0]
    expect(page.locator("#lab-status")).to_contain_text("Noised to step 5")
    expect(page.locator("#chain-strip .chain-frame")).to_have_count(2)  # t = 5 and the end
    assert "start=5" in page.url and "noise_seed=12" in page.url and "drawing=" in page.url
    no_violations(page)
    # The link brings the same drawing, step and seed back.
    again = watched(page.url.replace(page.url.split("/models")[0], ""), bypass_csp=True)
    expect(again.locator("#lab-status")).to_contain_text("Noised to step 5")
    expect(again.locator("#chain-where")).to_have_text("Step 5 of 5: x₀, the end of the chain.")
    expect(again.locator("#denoise-seed")).to_have_value("12")
    expect(grid_cell(again, 3, 4)).to_have_attribute("aria-label", "Row 4, column 5: level 16")


def test_a_seed_typed_draws_its_digit_and_a_bad_one_is_said_and_sends_nothing(watched):
    page = watched("/models/ddpm", bypass_csp=True)
    lab_ready(page)
    with page.expect_request(lambda r: r.url.endswith(SAMPLE) and sent(r) == {"seed": 12}):
        page.locator("#sample-seed").fill("12")  # typed: no button to press
    expect(page.locator("#lab-status")).to_contain_text("from noise seed 12.", timeout=60_000)
    page.locator("#sample-seed").fill("-3")
    expect(page.locator("#lab-status")).to_have_text("The seed must be a whole number from 0 to 2147483647.")
    page.locator("#sample-run").click()
    expect(page.locator("#lab-status")).to_have_text("The seed must be a whole number from 0 to 2147483647.")
    no_violations(page)


def test_the_diffusion_lab_at_375px_fits_and_is_tapped_through(watched):
    page = watched("/models/ddpm", PHONE, has_touch=True, is_mobile=True, bypass_csp=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    frame = page.locator('.chain-frame[data-step="30"]')
    frame.scroll_into_view_if_needed()
    frame.tap()
    expect(page.locator("#chain-where")).to_contain_text("Step 30 of 100: t = 70.")
    box = page.locator("#chain-images").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    page.locator("#clear-drawing").tap()
    grid_cell(page, 3, 3).tap()
    with page.expect_request(lambda r: r.url.endswith(DENOISE) and sent(r)["image"][3][3] == 16):
        page.locator("#denoise-run").tap()
    expect(page.locator("#lab-status")).to_contain_text("Noised to step 40")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    no_violations(page, phone=True)
