"""What if? and what training changed, in a real browser: changes chosen from the graph by keyboard, the outcome told
first, links that keep them, on a recorded case and on the lab's drawing."""

import json
import re
import urllib.request
from urllib.parse import quote, unquote

import pytest
from playwright.sync_api import expect

from .browsing import PHONE
from .page_checks import choose_node, effects, graph_ready, grid_cell, lab_ready, small_text
from .test_training import TRAINED

pytestmark = pytest.mark.browser


def test_what_if_a_module_is_zeroed_or_scaled_chosen_from_the_graph_by_keyboard(watched):
    """Select a node, choose a change, run: the graph shades what moved, the items show before and after, the
    changes stack and come off one by one, and the URL holds them."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    panel = page.locator("#whatif")
    choose_node(page, "add@GPT#0")
    expect(panel.locator("#whatif-node")).to_contain_text("is an op: select a module")
    expect(panel.locator("#whatif-add")).to_be_disabled()
    choose_node(page, "h.0.mlp")
    expect(panel.locator("#whatif-node")).to_have_text("h.0.mlp")
    panel.locator("#whatif-action").select_option("zero")
    expect(panel.locator("#whatif-add")).to_be_enabled()  # once the server said what h.0.mlp can do here
    panel.locator("#whatif-add").focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    shades = effects(page)
    assert shades["h.0.mlp"] == 1 and shades["lm_head"] > 0 and shades["wte"] == 0
    expect(page.locator('#whatif-results tr[data-item="next_token_probs"]')).to_be_visible()
    bars = page.locator("#whatif-results .whatif-bars figcaption")
    expect(bars.filter(has_text="Token IDs")).to_have_count(0)  # an input
    expect(bars.filter(has_text="Next-token loss")).to_have_count(1)
    assert "whatif=" in page.url and "h.0.mlp" in unquote(page.url)
    choose_node(page, "ln_f")
    panel.locator("#whatif-action").select_option("scale")
    expect(panel.locator("#whatif-factor")).to_be_visible()
    panel.locator("#whatif-factor").fill("3")
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-list li")).to_have_count(2)
    expect(panel.locator("#whatif-list li").nth(1)).to_contain_text("scale ln_f × 3")
    panel.get_by_role("button", name="Remove: zero h.0.mlp").click()
    expect(panel.locator("#whatif-list li")).to_have_count(1)
    expect(page.locator('#graph-stage .g-node[data-id="h.0.mlp"]')).to_have_attribute("data-effect", "0",
                                                                                     timeout=60_000)
    panel.get_by_role("button", name="Remove: scale ln_f × 3").click()
    expect(panel.locator("#whatif-status")).to_contain_text("No change")
    assert effects(page) == {} and "whatif=" not in page.url


def test_what_if_offers_only_the_changes_that_run_on_the_case_shown(watched):
    """The panel asks the server what each node can do on the case shown: a node the run never calls offers
    nothing and says why, an action a node cannot take is disabled with its reason, a patch comes from another case
    that runs the node alike, an open module is selected by its box, and one button adds a change and runs."""
    page = watched("/models/gpt?step=causal")
    graph_ready(page)
    panel = page.locator("#whatif")
    expect(panel.locator("#whatif-run")).to_have_count(0)
    page.locator("#graph-stage").scroll_into_view_if_needed()  # below the lab, which the page leads with
    box = page.locator('#graph-stage .g-cluster[data-id="h"] > rect').bounding_box()  # h is open: a box
    stage = page.locator("#graph-stage").bounding_box()
    page.mouse.click(max(box["x"], stage["x"]) + 5, max(box["y"], stage["y"]) + 26)  # inside it, below its title
    expect(panel.locator("#whatif-node")).to_have_text("h")
    expect(panel.locator("#whatif-why")).to_contain_text("Nothing to change here: this input's run gets no output")
    expect(panel.locator("#whatif-add")).to_be_disabled()
    choose_node(page, "wpe")
    expect(panel.locator('#whatif-action option[value="mean"]')).to_be_disabled()
    expect(panel.locator("#whatif-why")).to_contain_text("mean: mean averages over positions, and wpe's output has "
                                                         "shape [8, 32]")
    choose_node(page, "h.0.mlp")
    page.get_by_role("button", name="Select h.0, the module around h.0.mlp").focus()  # by keyboard, from inside
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-node")).to_have_text("h.0")
    expect(page.locator('#graph-stage .g-cluster[data-id="h.0"]')).to_have_class(re.compile("is-selected"))
    choose_node(page, "h.0.mlp")
    expect(panel.locator("#whatif-why")).to_be_hidden()
    panel.locator("#whatif-action").select_option("patch")
    expect(panel.locator("#whatif-source")).to_have_value("repeats")  # not the case shown
    expect(panel.locator('#whatif-source option[value="pi"]')).to_be_disabled()
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.locator("#whatif-list li")).to_have_text([re.compile("patch h.0.mlp from “7 0 7 7 = 0 7 7 7”")])
    assert effects(page)["h.0.mlp"] > 0


def test_what_if_tells_the_outcome_first_and_folds_what_did_not_move(watched):
    """The answer opens with what the model answered before and after, in words; the items that moved follow, most
    first; the unchanged ones (the input image among them) are folded away, and no vector that did not move is
    drawn, each drawn one's bars named by their digits."""
    changes = '[{"node":"blocks.1","action":"zero"}]'
    page = watched(f"/models/vit?whatif={quote(changes)}")
    graph_ready(page)
    results = page.locator("#whatif-results")
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    # A near-certain prediction's cross entropy, -log p with p within float32 rounding of 1, moves in its fourth
    # digit with the CPU's kernels (the recording's 0.0007571; 0.0007573 on a CPU with AVX2 alone): the rest is exact.
    expect(results.locator(".whatif-outcome")).to_have_text(
        "Before the changes: Read as “0” with probability 1: right, the digit is “0”. "
        "With them: Read as “8” with probability 0.12: wrong, the digit is “0”.")
    moved = results.locator("table").first.locator("tbody tr")
    changes_read = [float(text) for text in moved.locator("td:nth-child(4)").all_inner_texts()]
    assert changes_read and all(change > 0 for change in changes_read)
    unchanged = results.locator("details.whatif-unchanged")
    expect(unchanged.locator("summary")).to_contain_text("unchanged (the inputs among them)")
    expect(unchanged.locator('tr[data-item="image"]')).to_be_hidden()  # folded
    unchanged.locator("summary").click()
    expect(unchanged.locator('tr[data-item="image"]')).to_be_visible()
    expect(unchanged.locator('tr[data-item="label"]')).to_be_visible()
    # Block 1's own attention is computed before its output is zeroed: that vector did not move, and is not drawn.
    expect(unchanged.locator('tr[data-item="cls_to_itself"]')).to_be_visible()
    expect(results.locator(".whatif-bars figcaption")).to_have_text(
        ["Logits (digits 0-9): before and after", "Class probabilities (digits 0-9): before and after"])
    # The answer comes under its controls, as wide as they are, beside the picture it shades; no table in it is
    # clipped.
    side, wide = (page.locator(s).bounding_box() for s in ("#whatif", "#whatif-results"))
    assert wide["width"] >= side["width"] - 1 and wide["y"] > side["y"]
    assert wide["x"] + wide["width"] < page.locator("#graph-stage").bounding_box()["x"]
    clipped = results.locator(".table-wrap").evaluate_all(
        "boxes => boxes.filter((b) => b.scrollWidth > b.clientWidth + 1).length")
    assert clipped == 0


def test_a_changed_attention_pattern_is_drawn_before_and_after_on_one_scale_with_its_tokens(watched):
    """Layer 0's attention zeroed: layer 1's heads now attend elsewhere, and a learner sees each pattern change as
    two maps, before and after, on one colour scale, the tokens on their axes; a map that did not move is not drawn."""
    changes = '[{"node":"h.0.attn","action":"zero"}]'
    page = watched(f"/models/gpt?whatif={quote(changes)}")
    graph_ready(page)
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    maps = page.locator("#whatif-results figure.whatif-maps")
    expect(maps).to_have_count(3)
    keys = maps.evaluate_all("figures => figures.map((f) => f.dataset.item)")
    assert {"attention_b1_h0", "attention_b1_h1"} <= set(keys) and not any(k.startswith("attention_b0") for k in keys)
    head = page.locator('#whatif-results figure.whatif-maps[data-item="attention_b1_h0"]')
    expect(head.locator("figcaption")).to_contain_text("before and after")
    before, after = (head.locator("svg[role=img]").nth(n) for n in (0, 1))
    assert before.get_attribute("aria-label").endswith("before") and after.get_attribute("aria-label").endswith("after")
    fills = [box.locator("rect[fill]").evaluate_all("cells => cells.map((c) => c.getAttribute('fill'))")
             for box in (before, after)]
    assert fills[0] != fills[1]  # the pattern moved
    legend = [box.locator("text").evaluate_all("texts => texts.map((t) => t.textContent)") for box in (before, after)]
    assert "=" in legend[0] and "=" in legend[1]  # the case's tokens name the rows and columns
    assert any(t.startswith("max") for t in legend[0])
    # In the table, an answer's tokens are its ids, and a vector of amounts is told by its largest entry.
    row = page.locator('#whatif-results tr[data-item="answer"] td')
    expect(row).to_have_text(["1 1 3 4", "1 3 4 4", "2"])
    loss = page.locator('#whatif-results tr[data-item="position_loss"] td').first
    expect(loss).to_have_text("largest: entry 1, 32.03")
    expect(page.locator('#whatif-results tr[data-item="attention_b1_h0"] td').first).to_have_text("8 × 8 map")


def test_a_changed_vectors_largest_entry_is_named_as_the_recipe_names_it(watched):
    changes = '[{"node":"encoder.attention","action":"zero"}]'
    page = watched(f"/models/bert-mlm?whatif={quote(changes)}")
    graph_ready(page)
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    cells = page.locator('#whatif-results tr[data-item="first_mask_probabilities"] td')
    expect(cells.first).to_have_text(re.compile(r"^largest: “[^”]+”, 0\.\d+$"))


def test_a_what_if_link_shows_the_same_changes_on_a_phone(watched):
    changes = '[{"node":"h.1.attn","action":"zero","head":1},{"node":"h.0.mlp","action":"patch","from_case":"pi"}]'
    page = watched(f"/models/gpt?case=repeats&step=causal&whatif={quote(changes)}", PHONE)
    graph_ready(page)
    panel = page.locator("#whatif")
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.locator("#whatif-list li")).to_have_text([re.compile("zero h.1.attn head 1"),
                                                            re.compile("patch h.0.mlp from “3 1 4 1 = 1 1 3 4”")])
    assert effects(page)["h.1"] > 0  # h.1 is closed: its box stands for h.1.attn and shades by its output
    expect(page.locator("#whatif-results caption").first).to_contain_text("“7 0 7 7 = 0 7 7 7”: what the changes moved")
    assert small_text(page) == []


@pytest.mark.parametrize("slug", TRAINED)
def test_what_training_changed_steps_through_the_stages_and_a_link_keeps_the_view(watched, live_server, slug):
    """Run the case on every stage (keyboard): the graph shades each module as the API measured it, the first
    stage moves nothing, the choice lives in the URL and a reload shows it again; nothing under 12 px on a phone."""
    page = watched(f"/models/{slug}")
    graph_ready(page)
    panel = page.locator("#training")
    panel.locator("#training-run").focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#training-status")).to_contain_text("Done", timeout=60_000)
    case = page.evaluate("document.getElementById('model-page').dataset.case")
    request = urllib.request.Request(f"{live_server}/api/models/{slug}/training", method="POST",
                                     data=json.dumps({"case": case}).encode(),
                                     headers={"Content-Type": "application/json"})
    stages = json.load(urllib.request.urlopen(request))["stages"]
    # The outcome first: the case's numbers that training changed, initialisation against the trained weights;
    # nothing the same at every stage (an input's token ids) drawn as bars.
    expect(page.locator("#training-results .training-outcome")).to_have_text(re.compile(
        rf"^What training changed, {re.escape(stages[0]['label'].lower())} → as trained: .+ → .+\.$"))
    for bars in panel.locator(".training-bars").all():
        key = bars.get_attribute("data-item")
        assert len({json.dumps(stage["values"][key]) for stage in stages}) > 1, key
    shades = effects(page)
    assert shades and all(shades[node] == pytest.approx(stages[-1]["weights"][node], rel=1e-2) for node in shades)
    start = stages[0]["id"]
    first = page.locator(f'#training-results input[name="training-stage"][value="{start}"]')
    first.focus()
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    expect(page.locator("#training-results caption").nth(1)).to_contain_text(stages[0]["label"])
    assert set(effects(page).values()) == {0.0}
    panel.get_by_label("output on this case moved").check()
    expect(page.locator("#training-results tbody tr").first).to_have_attribute("data-stage", start)
    assert f"training={start}" in page.url and "moved=activations" in page.url
    phone = watched(page.url.removeprefix(live_server), PHONE)
    graph_ready(phone)
    expect(phone.locator("#training-status")).to_contain_text("Done", timeout=60_000)
    expect(phone.locator(f'input[name="training-stage"][value="{start}"]')).to_be_checked()
    expect(phone.locator('input[name="training-moved"][value="activations"]')).to_be_checked()
    assert small_text(phone) == []


def test_what_if_runs_on_the_drawing_in_the_lab_and_a_link_keeps_it(watched):
    """The image lab: the changes run on the lab's input (the drawing the lab last read), the digit's
    probabilities before and after side by side; the choice and the drawing live in the URL."""
    page = watched("/models/lenet?step=convolve")
    graph_ready(page)
    lab_ready(page)
    grid_cell(page, 3, 3).focus()
    page.keyboard.press("Space")  # ink one more cell: the lab reads a drawing no case recorded
    expect(page.locator("#lab-status")).to_contain_text("Read as", timeout=60_000)
    panel = page.locator("#whatif")
    panel.get_by_label("your input in the lab").check()
    choose_node(page, "fc1")
    panel.locator("#whatif-action").select_option("zero")
    expect(panel.locator("#whatif-add")).to_be_enabled()  # once the server said what fc1 can do on the drawing
    panel.locator("#whatif-add").click()
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(page.locator("#whatif-results caption").first).to_contain_text("Your lab input: what the changes moved")
    expect(page.locator('#whatif-results tr[data-item="confidence"]')).to_be_visible()
    expect(page.locator("#whatif-results .whatif-bars figcaption").filter(has_text="probabilit")).to_have_count(1)
    shades = effects(page)
    assert shades["fc1"] == 1 and shades["fc2"] > 0 and shades["stage1.conv"] == 0  # stage1 opens with the step
    assert "whatif_on=lab" in page.url and "drawing=" in page.url
    page.goto(page.url)
    graph_ready(page)
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    expect(panel.get_by_label("your input in the lab")).to_be_checked()
    expect(page.locator("#whatif-results caption").first).to_contain_text("Your lab input: what the changes moved")
    assert effects(page)["fc1"] == 1

