"""The graph lab in a real browser: a link added with the keyboard and removed with two clicks, another member
given, a link that brings the graph back, and a phone's width; axe after every interaction."""

import itertools
import json
import math
import re

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import axe_violations, lab_ready, small_text

pytestmark = pytest.mark.browser

RUNS = "/api/models/gcn/runs"


def sent(request) -> dict:
    return json.loads(request.post_data)


def no_violations(page, phone: bool = False) -> None:
    assert axe_violations(page) + (small_text(page) if phone else []) == []


def test_a_link_is_added_with_the_keyboard_and_removed_with_two_clicks(watched):
    page = watched("/models/gcn", bypass_csp=True)
    lab_ready(page)  # Zachary's graph, the two leaders given, trained again and reproducing the recording
    expect(page.locator("#lab-status")).to_contain_text("31 of the 32 members not given placed on the side they joined")
    expect(page.locator(".graph-node")).to_have_count(34)
    # No node hides another: every two circles as drawn lie apart
    circles = page.evaluate("""() => [...document.querySelectorAll('.graph-drawing circle')].map((c) => {
        const r = c.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2, r.width / 2]; })""")
    assert not [(a, b) for a, b in itertools.combinations(circles, 2)
                if math.hypot(a[0] - b[0], a[1] - b[1]) < a[2] + b[2]]
    expect(page.locator(".graph-node.is-wrong")).to_have_count(1)
    expect(page.locator('.graph-node[data-member="8"]')).to_have_class(re.compile("is-wrong"))
    no_violations(page)
    # The keyboard: two menus and a button. Members 24 and 0 are not friends: the button says so.
    page.locator("#link-a").focus()
    page.locator("#link-a").select_option("24")
    page.locator("#link-b").select_option("0")
    expect(page.locator("#link-toggle")).to_have_text("Add the link")
    with page.expect_request(lambda r: r.url.endswith(RUNS) and [0, 24] in sent(r)["edges"]) as asked:
        page.locator("#link-toggle").press("Enter")
    assert len(sent(asked.value)["edges"]) == 79
    expect(page.locator("#lab-status")).to_contain_text("trained on 79 links")
    expect(page.locator(".graph-link.is-added")).to_have_count(1)
    expect(page.locator("#link-toggle")).to_have_text("Remove the link")
    assert page.evaluate("document.activeElement.id") == "link-toggle" and "add=0-24" in page.url
    no_violations(page)
    # Two clicks on the drawing: member 8 and the Officer, a link of the recorded graph, removed.
    page.locator('.graph-node[data-member="8"]').click()
    expect(page.locator('.graph-node[data-member="8"]')).to_have_class(re.compile("is-picked"))
    with page.expect_request(lambda r: r.url.endswith(RUNS) and [8, 33] not in sent(r)["edges"]):
        page.locator('.graph-node[data-member="33"]').click()
    expect(page.locator("#lab-status")).to_contain_text("trained on 78 links")
    expect(page.locator(".graph-link.is-cut")).to_have_count(1)
    assert "cut=8-33" in page.url
    no_violations(page)


def test_another_member_given_and_a_link_that_brings_the_graph_back(watched):
    page = watched("/models/gcn", bypass_csp=True)
    lab_ready(page)
    with page.expect_request(lambda r: r.url.endswith(RUNS) and sent(r)["given"] == [1, 33]):
        page.locator("#given-0").select_option("1")
    expect(page.locator("#given-0-name")).to_have_text("Mr. Hi's side:")
    expect(page.locator('.graph-node[data-member="1"]')).to_have_class(re.compile("is-given"))
    # Giving the member already given for the other side is refused in words, and nothing is sent.
    page.locator("#given-0").select_option("33")
    expect(page.locator("#lab-status")).to_have_text("Officer is already given for another side: pick another member.")
    expect(page.locator("#given-0")).to_have_value("1")
    no_violations(page)
    again = watched("/models/gcn?cut=8-33&given=0,33", bypass_csp=True)
    expect(again.locator("#lab-status")).to_contain_text("32 of the 32 members not given placed", timeout=60_000)
    expect(again.locator(".graph-link.is-cut")).to_have_count(1)
    bad = watched("/models/gcn?cut=8-8", bypass_csp=True)
    expect(bad.locator("#lab-status")).to_contain_text("The link's input could not be used (cut must be links")


def test_the_graph_lab_at_375px_fits_and_is_tapped(watched):
    page = watched("/models/gcn", PHONE, has_touch=True, is_mobile=True, bypass_csp=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    drawing = page.locator(".graph-drawing")
    box = drawing.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    page.locator('.graph-node[data-member="24"]').tap()
    with page.expect_request(lambda r: r.url.endswith(RUNS) and [24, 25] not in sent(r)["edges"]):
        page.locator('.graph-node[data-member="25"]').tap()
    expect(page.locator("#lab-status")).to_contain_text("trained on 77 links")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    no_violations(page, phone=True)
