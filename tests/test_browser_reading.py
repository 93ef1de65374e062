"""The page a learner reads from the top, in a real browser: the overview the tour opens on, the section navigation,
answers at the page's width, folded figures, attention maps titled, and the glossary on hover and focus; axe
after the interactions."""

import re

import pytest
from playwright.sync_api import expect

from .browsing import DESKTOP, PHONE
from .page_checks import axe_violations, choose_node, graph_ready, lab_ready, small_text

pytestmark = pytest.mark.browser


def test_every_page_opens_on_the_overview_with_modules_closed_and_labels_readable(watched):
    """The first view of a page: the tour's overview, no module open, every graph label at 11 px or more on a
    phone and 8.5 px or more on a desktop."""
    for slug, viewport, readable in (("bert", PHONE, 11), ("transformer", PHONE, 11), ("resnet", DESKTOP, 8.5)):
        page = watched(f"/models/{slug}", viewport)
        graph_ready(page)
        expect(page.locator("#tour-position")).to_have_text(re.compile(r"^Step 1 of "))
        expect(page.locator("#graph-stage .g-cluster")).to_have_count(0)  # no open module's frame
        smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll('#graph-stage .g-node text')]
            .filter((t) => { const r = t.getBoundingClientRect(); return r.height > 0 && r.bottom > 0; })
            .map((t) => t.getBoundingClientRect().height))""")
        assert smallest >= readable, (slug, smallest)


def test_the_section_navigation_stays_in_reach_and_marks_the_section_read(watched):
    page = watched("/models/lenet")
    graph_ready(page)
    nav = page.locator("#section-nav")
    page.locator('#section-nav a[href="#lab"]').click()
    expect(page.locator('#section-nav a[href="#lab"]')).to_have_attribute("aria-current", "true")
    box = nav.bounding_box()
    assert box["y"] == pytest.approx(0, abs=1)  # stuck to the top of the window, far down the page
    heading = page.locator("#lab-title").bounding_box()
    assert heading["y"] >= box["y"] + box["height"]  # the section's heading lands below it, not under it



@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_term_shows_its_definition_on_hover_and_on_focus_inside_the_window(watched, viewport):
    """The VAE's case says "negative ELBO" and "nats": each is marked once per section, its definition shown on
    hover and on keyboard focus, inside the window even near its right edge; marked terms are added to answers
    drawn later (the verification report's rtol and atol)."""
    page = watched("/models/vae", viewport, bypass_csp=True)
    lab_ready(page)
    example = page.locator("#example")
    terms = example.locator("dfn.term")
    expect(terms.filter(has_text="ELBO").first).to_be_visible()
    expect(example.locator('.case > .case-note dfn.term[data-term="nats"]')).to_have_count(1)
    term = example.locator('dfn.term[data-term="ELBO"]').first
    tip = page.locator("#term-tip")  # the page's one tip, outside the text it explains
    expect(term).to_have_attribute("aria-describedby", "term-tip")
    expect(tip).to_be_hidden()
    term.focus()
    expect(tip).to_be_visible()
    expect(tip).to_have_text(re.compile(r"^Evidence lower bound: .+ in nats\.$"))
    box, width = tip.bounding_box(), page.viewport_size["width"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    page.keyboard.press("Tab")  # focus moves on: the definition goes
    expect(tip).to_be_hidden()
    nats = example.locator('dfn.term[data-term="nats"]').first
    nats.scroll_into_view_if_needed()
    nats.hover()
    expect(tip).to_have_text(re.compile("^A unit of information"))
    expect(example.locator(".case-note")).not_to_contain_text("A unit of information")  # not in the text itself
    page.locator("#reverify").click()
    report = page.locator("#verify-report")
    expect(report.locator("details").first).to_be_visible(timeout=120_000)
    expect(report.locator('dfn.term[data-term="rtol"]')).to_have_count(1)  # drawn after the page loaded
    assert axe_violations(page) + (small_text(page) if viewport is PHONE else []) == []


def test_a_term_inside_a_name_is_not_marked(watched):
    """The overview names word_embeddings and position_embeddings: "embeddings" in them is part of a name."""
    page = watched("/models/bert-mlm")
    graph_ready(page)
    expect(page.locator("#tour")).to_contain_text("word_embeddings, position_embeddings")
    touching = page.evaluate("""() => [...document.querySelectorAll('dfn.term')].filter((d) =>
        /[\\w]$/.test(d.previousSibling?.textContent ?? '') || /^[\\w]/.test(d.nextSibling?.textContent ?? ''))
        .map((d) => d.parentElement.textContent.slice(0, 80))""")
    assert touching == []


def test_attention_maps_title_their_queries_and_keys(watched):
    page = watched("/models/bert?case=mask-b")
    graph_ready(page)
    figure = page.locator("#case-panel .heatmap-figure").first
    expect(figure.locator("svg text.axis-title")).to_have_text(["rows: query", "columns: key"])
    expect(figure.locator("thead th").first).to_have_text("query / key")
    lab_ready(page)
    expect(page.locator("#lab svg text.axis-title").first).to_have_text("rows: query")  # live maps too


def test_a_case_shows_its_outcome_and_first_figures_and_folds_the_rest_under_their_names(watched):
    """On a phone the case shows its top above a button for the rest; then its first figure, and the rest folded
    under their names."""
    page = watched("/models/lenet?case=three", PHONE, bypass_csp=True)
    graph_ready(page)
    case = page.locator("#case-panel")
    expect(case.locator("#case-outcome")).to_have_text("Read as “3” with probability 1: right, the digit is “3”.")
    expect(case.locator(".case-outcome")).to_contain_text("Read as")  # the numbers before any figure
    container = page.locator("#case-container")
    expect(container).to_have_class(re.compile(r"\bis-cut\b"))
    assert container.bounding_box()["height"] == pytest.approx(320, abs=1)  # 20 rem
    show = page.get_by_role("button", name="Show the whole case")
    show.click()
    expect(show).to_be_hidden()
    expect(container).to_be_focused()  # the reader's place kept where the button was
    assert page.evaluate("(box) => box.scrollHeight <= box.clientHeight + 1", container.element_handle())
    first = case.locator(":scope > figure.image-figure")  # the digit, ink on paper
    expect(first).to_have_attribute("data-label", "Input image (grey levels 0-16)")
    more = case.locator("details.more-figures")
    summary = more.locator(":scope > summary")
    expect(summary).to_have_text(re.compile(r"^6 more figures: Stage 1 conv \+ tanh; Stage 1 pooled; "))
    expect(more.locator("figure").first).to_be_hidden()
    summary.click()
    expect(more.locator(".multiples-figure").first.locator(".feature-map svg")).to_have_count(6)  # drawn, as the rest
    assert axe_violations(page) + small_text(page) == []
    desktop = watched("/models/lenet?case=three")  # a desktop has the room: nothing cut
    graph_ready(desktop)
    expect(desktop.locator("#case-container")).not_to_have_class(re.compile(r"\bis-clamped\b"))
    expect(desktop.get_by_role("button", name="Show the whole case")).to_be_hidden()


def test_a_long_vector_scrolls_in_its_box(watched):
    """A 384-wide embedding was 7,700 px of bars on a phone: its bars scroll in a focusable box."""
    page = watched("/models/bert-base", PHONE)
    graph_ready(page)
    box = page.locator("#case-panel .bars-scroll").first
    expect(box).to_have_attribute("tabindex", "0")
    assert box.bounding_box()["height"] < 420 and box.locator(".bar-row").count() == 384
    box.focus()  # below the case's cut on a phone: focus opens the case, so that nothing focused is hidden
    expect(page.locator("#case-container")).not_to_have_class(re.compile(r"\bis-cut\b"))
    page.keyboard.press("End")
    expect(box.locator(".bar-row").last).to_be_in_viewport()


def test_the_language_lab_leads_with_whether_the_answer_is_right_and_what_each_loss_counts(watched):
    """The outcome first, in words (the server's sentence), how it was computed folded under it, then each loss
    labelled with what it counts."""
    page = watched("/models/gpt")
    lab_ready(page)
    status = page.locator("#lab-status")
    expect(status).to_have_text("After “3 1 4 1 =” it answered “1 1 3 4”: right.")
    provenance = page.locator("#lab-status + #lab-provenance")
    expect(provenance.locator("summary")).to_contain_text("✓ matches the recorded case “3 1 4 1 = 1 1 3 4”")
    expect(provenance).not_to_have_attribute("open", "")
    first = page.locator("#lab-results dl.metrics").first.locator(".metric")
    expect(first.nth(0)).to_contain_text("of the true answer's digits (the positions the training scored)")
    expect(first.nth(1)).to_contain_text("over every position, the problem's random digits included")
    page.locator("#remove-token").click()  # no longer a whole problem: no right answer to judge it by
    expect(status).to_have_text("The answer is below.", timeout=60_000)


def test_an_image_lab_says_when_a_drawing_is_unlike_anything_the_model_learned_from(watched):
    page = watched("/models/lenet", PHONE, bypass_csp=True)
    lab_ready(page)
    expect(page.locator("#draw-prediction")).to_be_visible()
    expect(page.locator("#draw-unusual")).to_have_count(0)  # a held-out digit: one of those it learned from
    expect(page.locator("#draw-unusual-share")).to_have_text("0")  # its share of nearer held-out digits: none
    page.locator("#clear-drawing").click()
    note = page.locator("#draw-unusual")
    expect(note).to_contain_text("A blank page is unlike any digit the model learned from", timeout=60_000)
    expect(note).to_contain_text(re.compile(r"it must pick one of its 10 classes, so it reads \d with probability"))
    expect(page.locator("#draw-unusual-share")).to_have_text("1")
    assert axe_violations(page) + small_text(page) == []


def test_the_vae_draws_its_code_plane_with_z_axes_and_each_digits_codes_as_a_point(watched):
    page = watched("/models/vae?case=test-split", bypass_csp=True)
    graph_ready(page)
    case = page.locator("#case-panel")
    scatter = case.locator('figure[data-chart="scatter"] svg')
    expect(scatter.locator(".scatter-point")).to_have_count(10)
    expect(scatter.locator(".scatter-point text")).to_have_text([str(d) for d in range(10)])
    expect(scatter.locator("text.axis-title")).to_have_text(["z₁", "z₂"])
    expect(scatter.locator(".scatter-point title").first).to_have_text(re.compile(r"^0: z₁ -?[0-9.]+, z₂ -?[0-9.]+$"))
    plane = case.locator('figure[data-chart="heatmap"]').first.locator("svg")
    titles = ["rows: z₂ from 2.4 (top) to -2.4", "columns: z₁ from -2.4 (left) to 2.4 (right)"]
    expect(plane.locator("text.axis-title")).to_have_text(titles)
    assert plane.locator("text").count() == 2 + 2  # the titles and the legend: no row or column numbers 0-55
    assert plane.bounding_box()["width"] < 600  # a picture of the plane, not cells to read numbers by
    lab_ready(page)  # the lab's clickable map of the plane has its axes too, in the page's text beside it
    frame = page.locator("#latent-map .plane-frame")
    expect(frame.locator(".plane-x span")).to_have_text(["-2.8", "0", "2.8"])
    expect(frame.locator(".plane-y span")).to_have_text(["2.8", "0", "-2.8"])
    expect(frame.locator(".plane-titles")).to_have_text("Across: z₁, left to right; up: z₂, bottom to top.")
    assert axe_violations(page) == []


def test_every_layer_and_head_of_attention_at_once_follows_one_query_through_all(watched):
    page = watched("/models/gpt", bypass_csp=True)
    graph_ready(page)
    overview = page.locator("#case-panel .attention-overview")
    expect(overview.locator(".chart-title")).to_have_text("Attention: every block and head at once")
    maps = overview.locator(".overview-map svg")
    expect(maps).to_have_count(4)  # 2 blocks x 2 heads
    expect(overview.locator(".overview-layer")).to_have_text(["block 0", "block 1"])
    overview.locator("[data-follow]").select_option("4")  # "=": where the answer starts
    for k in range(4):
        expect(maps.nth(k).locator("rect.is-followed")).to_have_count(8)  # row 4 of an 8 x 8 map, in every head
        expect(maps.nth(k).locator('rect.is-followed[data-row="4"]')).to_have_count(8)
    maps.nth(3).locator('rect[data-row="6"][data-col="0"]').hover()
    expect(overview.locator("[data-follow]")).to_have_value("6")
    expect(maps.nth(0).locator('rect.is-followed[data-row="6"]')).to_have_count(8)
    assert axe_violations(page) == []
    # Wider than a phone (many layers and heads), the grid scrolls: the keyboard reaches it as a region of its own.
    grid = overview.locator(".overview-grid")
    expect(grid).to_have_attribute("tabindex", "0")
    expect(grid).to_have_attribute("role", "region")


def test_an_ops_recorded_name_is_read_out_in_its_details(watched):
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    choose_node(page, "add@GPT#0")
    details = page.locator("#node-details")
    expect(details.locator("h3")).to_have_text("add@GPT#0")  # the raw name stays, above its reading
    expect(details.locator(".node-in-words")).to_have_text("In words: the 1st Tensor.add in the model's own forward.")
    choose_node(page, "h.0.mlp")
    expect(details.locator(".node-in-words")).to_have_count(0)  # a module's name needs no reading
