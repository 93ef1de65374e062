"""The reinforcement lab in a real browser: an episode played and stepped through with the keyboard, a start picked
on the grid, exploration, the policy's case, a link that plays the same episode, and a phone's width; axe after
every interaction."""

import json
import re

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import axe_violations, lab_ready, small_text

pytestmark = pytest.mark.browser

EPISODE = "/api/models/dqn/episode"


def sent(request) -> dict:
    return json.loads(request.post_data)


def no_violations(page, phone: bool = False) -> None:
    assert axe_violations(page) + (small_text(page) if phone else []) == []


def test_an_episode_is_stepped_through_with_the_keyboard_and_another_started_on_the_grid(watched):
    page = watched("/models/dqn", bypass_csp=True)
    lab_ready(page)  # the greedy episode from the start, reproduced
    expect(page.locator("#lab-status")).to_contain_text("From row 4, column 0: 8 moves, return 0.72, the goal reached")
    expect(page.locator(".rl-cell")).to_have_count(25)
    # Every greedy move an arrow, as the server names the moves (its kind's settings): the start's is up.
    expect(page.locator('.rl-cell[data-cell="4,0"] text')).to_have_text("↑")
    # The recorded episode's moves are arrows and words, not codes 0-3.
    moves = page.locator("#case-panel").get_by_text("↑ up", exact=True)
    expect(moves.first).to_be_visible()
    no_violations(page)
    page.locator("#rl-step").focus()
    page.keyboard.press("End")
    expect(page.locator("#rl-where")).to_have_text("The end, after 8 moves, at row 0, column 4.")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#rl-where")).to_contain_text("Move 8 of 8, at row 0, column 3: the best move, → right")
    expect(page.locator("#rl-q .bar-row")).to_have_count(4)
    assert page.evaluate("document.activeElement.id") == "rl-step"
    no_violations(page)
    assert "move=7" in page.url  # the move shown is in the link: a reload shows it again
    page.reload()
    lab_ready(page)
    expect(page.locator("#rl-where")).to_contain_text("Move 8 of 8, at row 0, column 3: the best move, → right")
    expect(page.locator("#rl-step")).to_have_value("7")
    with page.expect_request(lambda r: r.url.endswith(EPISODE) and sent(r)["start"] == [2, 2]):
        page.locator('.rl-cell[data-cell="2,2"]').click()
    expect(page.locator("#lab-status")).to_contain_text("From row 2, column 2: 4 moves")
    expect(page.locator("#rl-start")).to_have_value("2,2")
    assert "start=2%2C2" in page.url or "start=2,2" in page.url
    # Exploring: every move random with ε = 1, said move by move.
    page.locator("#rl-epsilon").focus()
    page.keyboard.press("End")
    expect(page.locator("#rl-epsilon-value")).to_have_text("1")
    page.locator("#rl-seed").fill("3")
    with page.expect_request(lambda r: r.url.endswith(EPISODE) and sent(r)["epsilon"] == 1 and sent(r)["seed"] == 3):
        page.locator("#rl-run").click()
    expect(page.locator("#rl-where")).to_contain_text("a random move")
    play = page.locator("#rl-play")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "false")
    no_violations(page)


def test_the_policy_case_and_a_link_that_plays_the_same_episode(watched):
    page = watched("/models/dqn", bypass_csp=True)
    lab_ready(page)
    page.locator('[data-preset="policy"]').click()
    expect(page.locator("#record-check")).to_contain_text("“The policy over the grid”")
    expect(page.locator("#record-check")).to_have_class(re.compile("is-passed"))
    expect(page.locator("#lab-status")).to_have_text("The greedy move is an optimal one in 19 of 19 cells.")
    no_violations(page)
    again = watched("/models/dqn?start=3,4&epsilon=0&seed=0", bypass_csp=True)
    expect(again.locator("#lab-status")).to_contain_text("From row 3, column 4:", timeout=60_000)
    expect(again.locator("#rl-start")).to_have_value("3,4")
    bad = watched("/models/dqn?start=9", bypass_csp=True)
    expect(bad.locator("#lab-status")).to_contain_text("The link's input could not be used (start must be a row and a")


def test_the_reinforcement_lab_at_375px_fits_and_is_tapped(watched):
    page = watched("/models/dqn", PHONE, has_touch=True, is_mobile=True, bypass_csp=True)
    lab_ready(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    cell = page.locator('.rl-cell[data-cell="0,0"]')
    cell.scroll_into_view_if_needed()
    with page.expect_request(lambda r: r.url.endswith(EPISODE) and sent(r)["start"] == [0, 0]):
        cell.tap()
    expect(page.locator("#lab-status")).to_contain_text("From row 0, column 0: 4 moves")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    no_violations(page, phone=True)
