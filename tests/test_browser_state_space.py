"""The state-space lab in a real browser: a recorded case reproduced, the scan stepped through with the keyboard, a
sequence typed and edited with the buttons, a link that reads the same sequence, and a phone's width; axe after
every interaction."""

import json
import re

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import axe_violations, lab_ready, small_text

pytestmark = pytest.mark.browser

RUNS = "/api/models/mamba/runs"


def sent(request) -> dict:
    return json.loads(request.post_data)


def no_violations(page, phone: bool = False) -> None:
    assert axe_violations(page) + (small_text(page) if phone else []) == []


def test_the_scan_is_stepped_through_with_the_keyboard_and_a_typed_sequence_is_read(watched):
    page = watched("/models/mamba", bypass_csp=True, allow=(400,))  # a sequence without a marker: on purpose, once
    lab_ready(page)  # the recorded example, reproduced
    expect(page.locator("#record-check")).to_have_class(re.compile("is-passed"))
    expect(page.locator("#lab-status")).to_contain_text("Read 20 tokens; 4 answers asked for, 4 of them right")
    expect(page.locator("#seq-text")).to_have_value(".3..7...1....5..????")
    expect(page.locator(".lab-heads .lab-heatmap")).to_have_count(8)  # 2 layers × mixing, Δ, B, C
    no_violations(page)
    page.locator("#seq-step").focus()
    page.keyboard.press("Home")
    expect(page.locator("#seq-step-said")).to_have_text("1 of 20: “.”")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#seq-step-read")).to_have_text("Token 2 (“3”).")
    page.keyboard.press("End")
    expect(page.locator("#seq-step-read")).to_contain_text(
        "An answer is asked for here: the model gives “5”, which is right.")
    expect(page.locator('.seq-state[data-layer="2"] .bars').first.locator(".bar-row")).to_have_count(20)
    assert page.evaluate("document.activeElement.id") == "seq-step"
    no_violations(page)
    text = page.locator("#seq-text")
    with page.expect_request(lambda r: r.url.endswith(RUNS) and sent(r)["tokens"] == [0, 6, 0, 2, 9, 9]):
        text.fill(".6.2??")
    expect(page.locator("#lab-status")).to_contain_text("Read 6 tokens; 2 answers asked for")
    expect(page.locator("#record-check")).to_have_count(0)
    with page.expect_request(lambda r: r.url.endswith(RUNS) and sent(r)["tokens"] == [0, 6, 0, 2, 9]):
        page.locator("#seq-remove").click()
    expect(page.locator("#seq-text")).to_have_value(".6.2?")
    with page.expect_request(lambda r: r.url.endswith(RUNS) and sent(r)["tokens"] == [0, 6, 0, 2, 9, 9]):
        page.get_by_role("button", name="Add ?").click()
    assert "tokens=0%2C6%2C0%2C2%2C9%2C9" in page.url or "tokens=0,6,0,2,9,9" in page.url
    text.fill(".6x")
    expect(page.locator("#lab-status")).to_contain_text("“x” is not one of the tokens: type one of . 1 2 3 4 5 6 7 8 ?")
    text.fill("..3")  # no marker: the server says what is missing
    expect(page.locator("#lab-status")).to_contain_text("put at least one marker (?) where an answer is wanted")
    no_violations(page)


def test_a_link_reads_the_same_sequence_and_a_bad_one_is_said(watched):
    page = watched("/models/mamba?tokens=0,4,0,8,9,9", bypass_csp=True)
    expect(page.locator("#lab-status")).to_contain_text("Read 6 tokens; 2 answers asked for", timeout=60_000)
    expect(page.locator("#seq-text")).to_have_value(".4.8??")
    bad = watched("/models/mamba?tokens=0,42", bypass_csp=True)
    expect(bad.locator("#lab-status")).to_contain_text(
        "The link's input could not be used (tokens must be ids from 0 to 9")


def test_the_state_space_lab_at_375px_fits_and_is_tapped(watched):
    page = watched("/models/mamba", PHONE, has_touch=True, is_mobile=True, bypass_csp=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    add = page.get_by_role("button", name="Add 7")
    add.scroll_into_view_if_needed()
    with page.expect_request(lambda r: r.url.endswith(RUNS) and sent(r)["tokens"][-1] == 7):
        add.tap()
    expect(page.locator("#lab-status")).to_contain_text(
        "Read 21 tokens; 4 answers asked for; there is no right answer for this sequence.")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    no_violations(page, phone=True)
