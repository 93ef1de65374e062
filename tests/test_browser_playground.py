"""The MLP as a playground in a real browser: move a knob, train a variant on the server, watch its decision regions
change on the lab's plane as it learns, then open it as a model of its own; axe on the panel."""

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import axe_violations, lab_ready, small_text

pytestmark = pytest.mark.browser

SHADES = "Array.from(document.querySelectorAll('#plane-drawing rect[fill]')).map((r) => r.getAttribute('fill')).join()"


def test_a_knob_moved_trains_a_variant_whose_regions_change_as_it_learns(watched):
    page = watched("/models/mlp", bypass_csp=True)
    lab_ready(page)
    expect(page.locator(".plane-data")).to_have_count(4)  # XOR's four cases
    panel = page.locator("#train-your-own")
    expect(panel.get_by_label("data: the pattern it must learn")).to_have_value("xor")
    panel.get_by_label("data: the pattern it must learn").select_option("circles")
    hidden = panel.locator("#knob-hidden")
    hidden.focus()
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    expect(panel.locator("#knob-hidden-value")).to_have_text("4")
    assert axe_violations(page) == []
    panel.get_by_role("button", name="Train it").click()
    # The recipe's pictures, played in turn: the circles' 64 points, the regions at one step and at a later one.
    page.wait_for_function("Number(document.querySelector('#plane-drawing').dataset.epoch) >= 100")
    expect(page.locator(".plane-data")).to_have_count(64)
    early = page.evaluate(SHADES)
    page.wait_for_function("Number(document.querySelector('#plane-drawing').dataset.epoch) >= 1500", timeout=60_000)
    later = page.evaluate(SHADES)
    assert early != later, "the decision regions did not change while it trained"
    expect(page.locator("#lab-status")).to_contain_text("Your variant as it learns: after epoch")
    expect(panel.locator("#variant-curves svg").first).to_be_visible()
    link = panel.get_by_role("link", name="Open your variant")
    expect(link).to_be_visible(timeout=60_000)
    link.click()
    expect(page.locator("h1")).to_contain_text("Your variant of")
    expect(page.locator("#beside-cases tbody tr")).to_have_count(4)
    expect(page.locator("#beside-curves svg")).to_have_count(1)
    lab_ready(page)
    expect(page.locator(".plane-data")).to_have_count(64)  # its own lab: the circles it learnt
    assert axe_violations(page) == []
    page.set_viewport_size(PHONE)  # its outcomes beside the recorded ones wrap at a phone's width
    expect(page.locator("#beside-cases td").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert axe_violations(page) + small_text(page) == []


def test_the_knobs_fit_a_phone(watched):
    page = watched("/models/mlp", viewport=PHONE, bypass_csp=True)
    lab_ready(page)
    panel = page.locator("#train-your-own")
    panel.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert axe_violations(page) + small_text(page) == []
