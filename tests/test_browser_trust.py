"""Re-executing what a page shows, in a real browser: the reverification's progress and report, retraining drawn as the
model learns, and the verification history."""

import re

import pytest
from playwright.sync_api import expect

from .browsing import DESKTOP, PHONE
from .page_checks import axe_violations, graph_ready, small_text

pytestmark = pytest.mark.browser


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
        # the same bits where this machine's kernels round as the trainer's did, else within the recipe's tolerance
        expect(headline).to_contain_text(re.compile(r"^The same (bits|weights within the recipe's tolerance)"),
                                         timeout=120_000)
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



def test_a_chain_says_where_its_numbers_come_from_and_is_reverified_step_by_step(watched):
    """The DDPM at a phone's width: the page names the machine that recorded it, the value whose computation amplifies
    rounding and the processes checked step by step; re-verified, the report says each step held, and the value
    that amplifies names its envelope."""
    page = watched("/models/ddpm", PHONE)
    where = page.locator("#where-from")
    expect(where.locator("summary")).to_contain_text("Where these numbers come from: recorded on ")
    expect(where.locator("summary")).to_contain_text("140 steps one by one")
    where.locator("summary").click()
    expect(where).to_contain_text("Recorded ")
    expect(where).to_contain_text("each of the 50 recorded values is checked within its envelope")
    expect(where).to_contain_text("Rounding is amplified in 1 of them: The clean image each step's prediction implies")
    expect(where).to_contain_text("reverse in “A new digit from seed 7” (100 steps)")
    rounding = page.locator("#case-rounding")
    expect(rounding.locator("summary")).to_have_text(
        "Rounding is amplified in 1 value of this case; re-verifying checks its 100 steps one by one")
    expect(rounding).to_contain_text("Re-verifying replays each of the 100 steps")
    page.get_by_role("button", name="Re-verify on the server").press("Enter")
    headline = page.locator("#report-headline")
    expect(headline).to_contain_text("Passed", timeout=120_000)
    expect(headline).to_contain_text("140 steps of iterated processes replayed one by one from their recorded states")
    expect(headline).to_contain_text("within their envelopes")
    opened = page.locator('.report-case[data-case="sample"]')
    expect(opened.locator(".report-steps")).to_contain_text("each of the 100 steps of reverse was replayed")
    expect(opened.locator(".report-envelope").filter(has_text="its computation amplifies rounding")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert small_text(page) == []
