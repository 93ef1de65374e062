"""The induction-heads recipe: its model against an independent attention, each check passing and failing when
broken, its training's figures, and in a browser the induction heads' stripe fading without the previous-token
head."""

import json
import re
from urllib.parse import quote

import pytest
import torch
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT
from recipekit import weights as stored

from .conftest import recipe_module
from .page_checks import graph_ready

RECIPE = PROJECT_ROOT / "recipes" / "induction"
model_py = recipe_module(RECIPE, "model")
run = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return model_py.build_model()


@torch.no_grad()
def reference_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """The same weights through torch's own causal scaled-dot-product attention, written apart from model.py."""
    c = model.config
    x = model.embed.weight[ids]  # (B, T, C)
    pos = model.pos.weight[: ids.size(1)]
    for layer in model.layers:
        q, k = ((x + pos) @ layer.qk.weight.T).chunk(2, dim=-1)
        v = x @ layer.v.weight.T
        split = lambda t: t.unflatten(-1, (c.n_head, -1)).transpose(1, 2)  # noqa: E731
        y = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        x = x + y.transpose(1, 2).flatten(2) @ layer.out.weight.T
    return x @ model.unembed.weight.T


def test_the_model_computes_what_an_independent_attention_computes(model):
    tokens, _ = train.sequences(8, torch.Generator().manual_seed(0))
    for length in (1, 7, 32):
        ids = tokens[:, :length]
        assert torch.allclose(model(ids), reference_logits(model, ids), atol=1e-5)


@pytest.mark.parametrize("check", [run.check_induction, run.check_previous, run.check_halves])
def test_a_head_and_loss_check_passes_on_the_trained_model_and_fails_on_an_untrained_one(model, check):
    assert check(model)["passed"]
    torch.manual_seed(0)
    untrained = model_py.AttentionOnly(model_py.InductionConfig()).eval()
    assert not check(untrained)["passed"]


def test_the_circuit_check_fails_where_the_previous_token_head_is_gone(model):
    found = run.check_circuit(model)
    assert found["passed"] and found["detail"]["previous_token_head"] == 3
    broken = model_py.build_model()
    with torch.no_grad():
        width = broken.config.n_embd // broken.config.n_head
        broken.layers[0].out.weight[:, 3 * width : 4 * width] = 0  # head 3 of layer 0 writes nothing
    assert not run.check_circuit(broken)["passed"]


def test_the_phase_change_check_fails_on_a_steady_fall(model):
    found = run.check_phase(model)
    assert found["passed"] and found["detail"]["rounds"] == "11-16"
    steady = [3.2 - 2.6 * r / 39 for r in range(40)]
    assert not run.check_phase(model, steady)["passed"]


def test_the_reproduction_check_fails_on_a_changed_weight(model):
    assert run.check_reproduced(model)["passed"]
    broken = model_py.build_model()
    with torch.no_grad():
        broken.layers[1].out.weight.mul_(0.5)
    assert not run.check_reproduced(broken)["passed"]


def test_the_stored_figures_are_the_papers_headline_and_the_training_curves_are_kept():
    _, metadata = stored.read(model_py.WEIGHTS)
    assert float(metadata["induction_score"]) > 0.6 and float(metadata["previous_token_score"]) > 0.6
    assert float(metadata["second_half_loss"]) < float(metadata["first_half_loss"]) / 4
    curves = {k: json.loads(metadata[f"{k}_per_round"]) for k in ("second_half_loss", "induction_score")}
    assert len(curves["second_half_loss"]) == train.ROUNDS and curves["induction_score"][0] < 0.2


def test_every_sequence_holds_its_run_twice_in_a_row_anywhere():
    tokens, runs = train.sequences(64, torch.Generator().manual_seed(1))
    assert len({start for start, _ in runs.tolist()}) > 10  # the run stands anywhere, not at a fixed place
    for row, (start, length) in zip(tokens, runs.tolist(), strict=True):
        assert train.SHORTEST <= length <= train.LONGEST
        assert row[start : start + length].tolist() == row[start + length : start + 2 * length].tolist()


@pytest.mark.browser
def test_without_the_previous_token_head_the_induction_stripe_fades(watched):
    """What if? on a recorded repeat: zero layer 0's head 3, and the maps of layer 1's heads before and after show
    the stripe one run's length left of the diagonal fade, the heads' induction scores fall, and the repeat's loss
    rises."""
    changes = '[{"node":"layers.0","action":"zero","head":3}]'
    page = watched(f"/models/induction?case=blacksmith&whatif={quote(changes)}")
    graph_ready(page)
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    maps = page.locator("#whatif-results figure.whatif-maps")
    expect(maps.first).to_be_visible()
    drawn = maps.evaluate_all("figures => figures.map((f) => f.dataset.item)")
    assert any(re.fullmatch(r"attention_l1_h\d", key) for key in drawn), drawn
    row = page.locator('#whatif-results tr[data-item="seen_loss"] td')
    before, after = (float(row.nth(n).inner_text()) for n in (0, 1))
    assert before < 0.5 and after > 2  # copied, then guessed
    scores = page.locator('#whatif-results tr[data-item="induction_scores"] td')
    assert re.fullmatch(r"largest: “layer 1 · head \d”, 0\.8\d+", scores.nth(0).inner_text())
    assert float(scores.nth(1).inner_text().rsplit(", ", 1)[1]) < 0.4


@pytest.mark.browser
def test_the_lab_finds_the_heads_and_switching_the_previous_token_head_off_collapses_the_induction(watched):
    """A learner types a run twice: every head is scored, the previous-token head and the induction heads stand
    out, the chosen head is drawn at full size with both patterns outlined; switched off, the previous-token head
    takes the induction heads' copying and the loss of the repeat with it."""
    page = watched("/models/induction#lab")
    status = page.locator("#lab-status")
    expect(status).to_contain_text("looks one letter back", timeout=30_000)  # the first recorded case, read
    page.locator("#seq-text").fill("qzxjvkmaplehurtmaplehurt")
    full = page.locator("#lab-results figure.head-full")
    expect(full.locator("rect.cell-mark[data-mark='one letter back']")).to_have_count(23, timeout=30_000)  # 24 typed
    expect(status).to_contain_text("Layer 0 · head 3 looks one letter back")
    expect(status).to_contain_text("After a letter seen before the loss is")
    expect(full).to_have_attribute("data-key", re.compile(r"attention_l1_h\d"))  # the best copier, drawn first
    # Every letter of the run's second copy has an earlier place, just after which an induction head looks.
    expect(full.locator("rect.cell-mark[data-mark='just after an earlier place']")).to_have_count(9)
    page.locator('button.head-pick[data-head="attention_l0_h3"]').click()
    expect(full).to_have_attribute("data-key", "attention_l0_h3")
    page.locator("#head-off").click()
    result = page.locator("#head-off-result")
    expect(result.locator("h3")).to_have_text("Without layer 0 · head 3", timeout=30_000)
    rows = result.locator("table").nth(1).locator("tbody tr")
    copies = [[float(v) for v in rows.nth(k).locator("td").all_inner_texts()[2:4]] for k in range(4, 8)]
    assert max(before for before, _ in copies) > 0.6 and max(after for _, after in copies) < 0.2
    seen = result.locator("table").first.locator("tbody tr").nth(1).locator("td").all_inner_texts()
    assert float(seen[0]) < 1 < 2 < float(seen[1])
    expect(result.locator("figure.head-full")).to_have_count(2)  # a copier with the head and without it


@pytest.mark.browser
def test_the_lab_reads_what_a_person_types_and_a_refused_text_clears_the_old_answer(watched):
    """Words with spaces and a capital are read as letters, and the status says how; a digit is refused in words
    that say what may be typed, and the answer to the text before it goes."""
    page = watched("/models/induction#lab")
    status = page.locator("#lab-status")
    expect(status).to_contain_text("looks one letter back", timeout=30_000)
    expect(page.locator(".seq-text .fine")).to_contain_text("letters a–z")
    expect(page.locator("#lab .lab-task")).to_contain_text("an induction head looks back")
    page.locator("#seq-text").fill("The cat sat on the mat. The cat")
    expect(status).to_contain_text("Read as “thecatsatonthematthecat”: spaces and punctuation left out, capitals "
                                   "read as small letters.", timeout=30_000)
    expect(page.locator("#lab-results figure.head-full")).to_have_count(1)
    expect(page.locator("#graph-stage")).to_have_attribute("data-picture", "drawn")
    page.locator("#seq-text").fill("the cat 3")
    expect(status).to_contain_text("“3” is not one of the tokens: type letters a–z.")
    expect(page.locator("#lab-results")).to_be_empty()
    expect(page.locator("#lab-provenance")).to_have_count(0)
    # the picture is still the last run's, and says so
    expect(page.locator("#graph-picture-status")).to_contain_text("the last input the lab ran: the lab refused")
