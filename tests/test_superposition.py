"""The superposition recipe: its model against a plain reading of the paper's formula, each check passing and failing
when broken, the features it is trained on, and its lab's edits to W, in a browser too."""

import pytest
import torch
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "superposition"
model_py = recipe_module(RECIPE, "model")
run = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return model_py.build_model()


def changed(at: float, **tensors) -> "model_py.ToyModel":
    """The stored models with one sparsity's W or b replaced."""
    broken = model_py.build_model()
    index = model_py.SPARSITIES.index(at)
    with torch.no_grad():
        for name, value in tensors.items():
            getattr(broken, name)[index] = value
    return broken


def test_the_model_computes_relu_of_w_transposed_w_x_plus_b_for_each_sparsity(model):
    x = train.features(16, torch.Generator().manual_seed(3))
    out = model(x)
    for m in range(len(model_py.SPARSITIES)):
        W, b = model.W[m].detach(), model.b[m].detach()
        for row in range(16):
            expected = torch.clamp(W.T @ (W @ x[row, m]) + b, min=0)  # the paper's x' = ReLU(WᵀWx + b)
            assert torch.allclose(out[row, m], expected, atol=1e-6)


def test_the_features_are_zero_as_often_as_their_sparsity_says():
    x = train.features(20_000, torch.Generator().manual_seed(4))
    zeros = (x == 0).float().mean((0, 2))
    assert torch.allclose(zeros, torch.tensor(model_py.SPARSITIES), atol=0.01)
    assert x.max() <= 1 and x.min() >= 0


def test_the_pentagon_check_fails_on_four_features(model):
    assert run.check_pentagon(model)["passed"]
    four = model.W[model_py.SPARSITIES.index(0.8)].detach()
    assert not run.check_pentagon(changed(0.9, W=four))["passed"]


def test_the_dense_check_fails_where_more_than_two_features_are_written(model):
    found = run.check_dense(model)
    assert found["passed"] and abs(found["detail"]["angle"] - 90) < 1
    pentagon = model.W[model_py.SPARSITIES.index(0.9)].detach()
    assert not run.check_dense(changed(0.0, W=pentagon))["passed"]


def test_the_phase_check_fails_where_the_features_written_fall_with_sparsity(model):
    assert run.check_phase(model)["detail"] == {"0.0": 2, "0.3": 2, "0.5": 3, "0.7": 4, "0.8": 4, "0.9": 5,
                                                "0.95": 5, "0.99": 5}
    assert run.check_phase(model)["passed"]
    assert not run.check_phase(changed(0.95, W=torch.zeros(2, 5)))["passed"]


def test_the_bias_check_fails_without_the_negative_bias(model):
    assert run.check_bias(model)["passed"]
    assert not run.check_bias(changed(0.9, b=torch.zeros(5)))["passed"]


def test_the_reproduction_check_fails_on_a_changed_weight(model):
    assert run.check_reproduced(model)["passed"]
    assert not run.check_reproduced(changed(0.5, W=model.W[2].detach() * 0.9))["passed"]


def test_the_lab_edits_w_and_says_what_the_loss_becomes():
    """The lab's entry: a feature dropped is unwritten and a turned one points elsewhere, the loss as trained
    beside the edited one; no edit reproduces the recorded model."""
    lab = recipe_module(RECIPE, "lab")
    as_trained = lab.live_run(5)
    loss = next(m["value"] for m in as_trained["metrics"] if m["key"] == "held_out_loss")
    assert loss == next(m["value"] for m in as_trained["metrics"] if m["key"] == "trained_loss")
    edited = lab.live_run(5, drop=[4], turn=[90, 0, 0, 0, 0])
    columns = next(m["values"] for m in edited["matrices"] if m["key"] == "columns")
    before = next(m["values"] for m in as_trained["matrices"] if m["key"] == "columns")
    assert columns[4] == [0.0, 0.0]
    assert abs(columns[0][0] + before[0][1]) < 1e-6 and abs(columns[0][1] - before[0][0]) < 1e-6  # a quarter turn
    assert next(m["value"] for m in edited["metrics"] if m["key"] == "held_out_loss") > loss


@pytest.mark.browser
def test_the_lab_draws_the_arrows_and_a_dropped_feature_goes_to_the_origin(watched):
    page = watched("/models/superposition?case=sparsity-90#lab")
    status = page.locator("#lab-status")
    expect(status).to_contain_text("Writes 5 of its 5 features", timeout=30_000)  # sparsity 0.9, as trained
    arrows = page.locator("#lab-results .geometry-arrows line.scatter-arrow")
    expect(arrows).to_have_count(5)
    page.locator("[data-drop='4']").check()
    expect(status).to_contain_text("Writes 4 of its 5 features", timeout=30_000)
    expect(status).to_contain_text("against 0.02084 as trained")
    expect(page.locator("#lab-results .scatter-short")).to_have_text("at the origin: feature 4")
    page.locator("#geometry-model").fill("0")
    expect(status).to_contain_text("Writes 2 of its 5 features", timeout=30_000)  # dense: feature 4 was not written
    page.locator("#geometry-reset").click()
    expect(page.locator("[data-drop='4']")).not_to_be_checked()
