"""The grokking recipe: its model against an independent attention, its split, each check passing and failing when
broken, and its lab stepping through the rounds."""

import json

import pytest
import torch
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT
from recipekit import weights as stored

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "grokking"
model_py = recipe_module(RECIPE, "model")
run = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return model_py.build_model()


@torch.no_grad()
def reference(model, ids: torch.Tensor) -> torch.Tensor:
    """The same weights through torch's causal scaled-dot-product attention, written apart from model.py."""
    c = model.config
    x = model.embed.weight[ids] + model.pos.weight[: ids.size(1)]
    q, k, v = (x @ model.attn.qkv.weight.T).chunk(3, dim=-1)
    split = lambda t: t.unflatten(-1, (c.n_head, -1)).transpose(1, 2)  # noqa: E731
    y = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
    x = x + y.transpose(1, 2).flatten(2) @ model.attn.out.weight.T
    x = x + model.mlp.down(torch.relu(model.mlp.up(x)))
    return x[:, -1] @ model.unembed.weight.T


def test_the_model_computes_what_an_independent_attention_computes(model):
    pairs = torch.cartesian_prod(torch.arange(0, 41, 5), torch.arange(0, 41, 7))
    ids = train.inputs(pairs)
    assert torch.allclose(model(ids), reference(model, ids), atol=1e-5)


def test_the_split_holds_every_sum_once_and_the_halves_apart():
    seen, held = train.split()
    both = torch.cat([seen, held])
    assert len(seen) == 840 and len(held) == 841
    assert len({tuple(p) for p in both.tolist()}) == 41 * 41
    assert train.answers(torch.tensor([[40, 39]])).item() == 38


def test_the_delay_check_fails_where_both_halves_are_learnt_together(model):
    assert run.check_delay(model)["detail"] == {"memorised_round": 2, "generalised_round": 38}
    assert run.check_delay(model)["passed"]
    together = [min(1.0, 0.1 * r) for r in range(1, 51)]
    assert not run.check_delay(model, (together, together))["passed"]


def test_the_generalisation_check_fails_on_a_changed_weight(model):
    assert run.check_generalised(model)["passed"]
    broken = model_py.build_model()
    with torch.no_grad():
        broken.mlp.up.weight.mul_(0.3)
    assert not run.check_generalised(broken)["passed"]


def test_the_fourier_check_finds_the_frequencies_train_py_found_and_fails_on_an_untrained_embedding(model):
    found = run.check_fourier(model)
    assert found["passed"] and found["detail"]["frequencies"] == [3, 6, 12, 18, 19]
    torch.manual_seed(0)
    assert not run.check_fourier(model_py.OneLayer(model_py.GrokConfig()))["passed"]


def test_the_sharpening_check_fails_on_a_spectrum_that_never_settles(model):
    assert run.check_sharpened(model)["passed"]
    flat = [[1 / 20] * 20 for _ in range(50)]
    assert not run.check_sharpened(model, flat)["passed"]


def test_the_stored_curves_and_spectra_are_those_of_every_round():
    _, metadata = stored.read(model_py.WEIGHTS)
    spectra = json.loads(metadata["spectrum_per_round"])
    assert len(spectra) == train.ROUNDS and all(abs(sum(s) - 1) < 1e-5 for s in spectra)
    assert json.loads(metadata["train_accuracy_per_round"])[1] >= 0.99


def test_the_lab_computes_a_rounds_spectrum_from_the_embedding_kept_after_it():
    lab = recipe_module(RECIPE, "lab")
    _, metadata = stored.read(model_py.WEIGHTS)
    spectra = json.loads(metadata["spectrum_per_round"])
    for round_ in (1, 20, 50):
        found = lab.at_round(round_)
        assert found["spectrum"] == pytest.approx(spectra[round_ - 1], abs=1e-6)
        assert found["step"] == 100 * round_ and len(found["test_accuracy"]) == 50
    assert lab.at_round(50)["key_frequencies"] == [3, 6, 12, 18, 19] and lab.at_round(1)["key_share"] < 0.5


@pytest.mark.browser
def test_the_lab_steps_from_memorised_to_grokked(watched):
    page = watched("/models/grokking#lab")
    status = page.locator("#lab-status")
    expect(status).to_contain_text("After round 50 (step 5,000): 100.0% of the training sums right and 100.0% of "
                                    "the held-out ones", timeout=30_000)
    page.locator("#spectrum-round").fill("20")
    expect(status).to_contain_text("After round 20 (step 2,000): 100.0% of the training sums right and 3.9% of the "
                                   "held-out ones; its 5 strongest frequencies hold 49%")
    expect(page.locator("#lab-results .curve-mark")).to_have_count(1)
    expect(page.locator("#lab-results .spectrum-bars li")).to_have_count(20)
