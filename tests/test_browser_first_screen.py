"""Try it first: every model page leads with something to try, within the first screen or so as loaded, whatever
the width. A page with a lab leads with the lab, its first control within 1,200 px of the top at 1280 px and 1,600 px
at 375 px, answered for its default input, the outcome said first in words (the sentence its recorded case opens
with) and how it was computed folded under it; a page without one leads with its recorded cases."""

import re

import pytest
from playwright.sync_api import expect

from .browsing import DESKTOP, PHONE
from .conftest import CATALOG_SLUGS, RECORDED_LAB_SLUGS, TestConfig
from .page_checks import graph_ready, lab_kind, lab_ready

FIRST_SCREEN = {DESKTOP["width"]: 1_200, PHONE["width"]: 1_600}  # px from the top, as loaded

CONTROLS = "input:visible, button:visible, select:visible, textarea:visible"

# Text a learner reads as prose (outside the tables, the folded values, code and the charts' own axes) that writes a
# number with a two-digit negative exponent: such a number is "about 0" there (app/domain/numbers.py).
TINY_IN_PROSE = r"""() => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (/\de-\d\d/.test(node.textContent)
        && !node.parentElement.closest("table, .value-details, code, pre, script, template, svg")) {
      found.push(node.textContent.trim().slice(0, 80));
    }
  }
  return found;
}"""


@pytest.fixture(scope="module")
def first_outcomes(module_apps) -> dict[str, str | None]:
    """What each page's lab should say first: the outcome of the recorded case it starts from."""
    with module_apps(TestConfig).app_context():
        from app.services.extensions import models

        found = {}
        for slug, model in models.catalog.models.items():
            presets = model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab) if model.lab else []
            found[slug] = model.outcome(model.case(presets[0]["id"])) if presets else None
        return found


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_the_page_leads_with_what_a_learner_can_try(watched, slug, viewport, first_outcomes):
    page = watched(f"/models/{slug}", viewport)
    graph_ready(page)
    limit = FIRST_SCREEN[viewport["width"]]
    top = "e => e.getBoundingClientRect().top + window.scrollY"
    assert page.evaluate(TINY_IN_PROSE) == []
    if lab_kind(slug):
        expect(page.locator("#lab[data-ready]")).to_have_count(1)
        if slug in RECORDED_LAB_SLUGS:
            lab_ready(page)  # its default input, a recorded case, answered as the page loads
            status = page.locator("#lab-status")
            if first_outcomes[slug]:  # the outcome in words first, as its recorded case says it
                expect(status).to_have_text(first_outcomes[slug])
            folded = page.locator("#lab-status + details#lab-provenance")
            expect(folded.locator("summary")).to_have_text(re.compile(r"^Computed live in .* · ✓ matches the recorded"))
            assert folded.get_attribute("open") is None
            assert "on the server" not in status.inner_text()
            assert status.evaluate(top) < limit, f"{slug}: the outcome at {status.evaluate(top):.0f} px"
            assert page.evaluate(TINY_IN_PROSE) == [], slug  # nor in the lab's answer
        first = page.locator("#lab").locator(CONTROLS).first
        assert first.evaluate(top) < limit, f"{slug}: the lab's first control at {first.evaluate(top):.0f} px"
        # the lab comes before the recorded cases and the verification; the graph beside it on a desktop, after it
        # on a phone
        for later in ("#example", "#verification"):
            if page.locator(later).count():
                assert page.locator("#lab").evaluate(top) < page.locator(later).evaluate(top), later
        lab, graph = page.locator("#lab").bounding_box(), page.locator("#graph-stage").bounding_box()
        if viewport is DESKTOP:  # both on the first screen, as loaded: the input and its picture
            assert graph["x"] > lab["x"] + lab["width"] - 1, (slug, lab, graph)
            assert first.evaluate(top) < DESKTOP["height"], slug
            assert graph["y"] + min(graph["height"], 320) <= DESKTOP["height"], (slug, graph)  # its first nodes
            assert graph["y"] + graph["height"] / 2 < 800, (slug, graph)  # at 1280 × 800 too, half of it at least
        else:
            assert graph["y"] > lab["y"], slug
    else:
        cases = page.locator("#example")
        assert cases.evaluate(top) < limit, f"{slug}: the recorded cases at {cases.evaluate(top):.0f} px"
        assert cases.evaluate(top) < page.locator("#architecture").evaluate(top)
        expect(page.locator("#case-panel")).to_be_visible()
