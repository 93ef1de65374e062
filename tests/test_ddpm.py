"""The diffusion recipe against an independent computation (the forward process, L_simple and the reverse
process written again in NumPy, step by step), its checks (each one broken), the retraining command and its lab
(its verification: tests/test_recordings.py)."""

import json

import numpy as np
import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import digits, training, weights

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "ddpm"
MANIFEST = PROJECT_ROOT / "manifests" / "ddpm" / "manifest.json"
ddpm = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")

# The paper's linear schedule scaled to T steps, in NumPy's own arithmetic.
STEPS = 100
BETAS = np.linspace(1e-3, 0.2, STEPS)
ALPHA_BARS = np.cumprod(1 - BETAS)


@pytest.fixture(scope="module")
def model():
    return ddpm.build_model()


def predicted(model, x: np.ndarray, t: int) -> np.ndarray:
    """The network's noise prediction for one image (8, 8) at step t: the only part NumPy does not compute."""
    with torch.no_grad():
        return model(torch.tensor(x, dtype=torch.float32)[None, None], torch.tensor([t]))[0, 0].double().numpy()


def test_the_schedule_and_the_closed_form_forward_process_match_numpy():
    schedule = recipe.schedule()
    np.testing.assert_allclose(schedule.betas.numpy(), BETAS, rtol=1e-12)
    np.testing.assert_allclose(schedule.alpha_bars.numpy(), ALPHA_BARS, rtol=1e-12)
    images, _ = digits.held_out()
    x0 = images[14].double().numpy() / 8 - 1
    eps = np.random.default_rng(0).standard_normal((8, 8))
    for t in (1, 37, 100):
        noised = schedule.noised(torch.tensor(x0, dtype=torch.float32)[None, None], torch.tensor([t]),
                                 torch.tensor(eps, dtype=torch.float32)[None, None])[0, 0].double().numpy()
        np.testing.assert_allclose(noised, np.sqrt(ALPHA_BARS[t - 1]) * x0 + np.sqrt(1 - ALPHA_BARS[t - 1]) * eps,
                                   atol=1e-6)


def test_l_simple_matches_numpy(model):
    images, _ = digits.held_out()
    x0 = images[:6].double().numpy() / 8 - 1
    rng = np.random.default_rng(1)
    eps, t = rng.standard_normal((6, 8, 8)), np.array([1, 5, 20, 50, 80, 100])
    loss = ddpm.simple_loss(model, recipe.schedule(), torch.tensor(x0, dtype=torch.float32)[:, None],
                            torch.tensor(t), torch.tensor(eps, dtype=torch.float32)[:, None])
    for k in range(6):
        noisy = np.sqrt(ALPHA_BARS[t[k] - 1]) * x0[k] + np.sqrt(1 - ALPHA_BARS[t[k] - 1]) * eps[k]
        assert loss[k].item() == pytest.approx(((eps[k] - predicted(model, noisy, t[k])) ** 2).mean(), rel=1e-5)


def test_the_reverse_process_matches_numpy_step_by_step(model):
    """Algorithm 2 written again in NumPy, with the recipe's own draws of noise: every image of the chain, every
    predicted noise and every x̂_0 agree, value by value."""
    chain = recipe.sample(model, 11)
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(1, 1, 8, 8, generator=generator)[0, 0].double().numpy()
    for k, t in enumerate(range(STEPS, 0, -1)):
        np.testing.assert_allclose(chain.images[k, 0].double().numpy(), x, atol=2e-5)
        eps = predicted(model, chain.images[k, 0].numpy(), t)  # on the recipe's x_t: errors do not compound
        np.testing.assert_allclose(chain.noise[k, 0].double().numpy(), eps, atol=1e-6)
        alpha_bar, beta = ALPHA_BARS[t - 1], BETAS[t - 1]
        x_t = chain.images[k, 0].double().numpy()
        np.testing.assert_allclose(chain.predicted[k, 0].double().numpy(),
                                   (x_t - np.sqrt(1 - alpha_bar) * eps) / np.sqrt(alpha_bar), atol=1e-4)
        z = torch.randn(1, 1, 8, 8, generator=generator)[0, 0].double().numpy() if t > 1 else 0
        x = (x_t - beta / np.sqrt(1 - alpha_bar) * eps) / np.sqrt(1 - beta) + np.sqrt(beta) * z
    np.testing.assert_allclose(chain.images[-1, 0].double().numpy(), x, atol=2e-5)


def test_each_step_s_loss_term_is_measured_against_the_image_given(model):
    images, _ = digits.held_out()
    drawing = images[14]
    noisy, chain = recipe.denoise(model, drawing.tolist(), 30, 2)
    terms = recipe.step_terms(chain, ddpm.to_model(drawing))
    t = 30
    x0 = drawing.double().numpy() / 8 - 1
    eps = (chain.images[0, 0].double().numpy() - np.sqrt(ALPHA_BARS[t - 1]) * x0) / np.sqrt(1 - ALPHA_BARS[t - 1])
    assert terms[t - 1].item() == pytest.approx(((eps - chain.noise[0, 0].double().numpy()) ** 2).mean(), rel=1e-4)
    assert torch.equal(noisy, chain.images[:1])  # the chain starts from the noised drawing


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_the_forward_check_catches_a_schedule_that_is_not_the_product(monkeypatch):
    original = ddpm.Schedule.__init__

    def wrong(self, config):
        original(self, config)
        self.alpha_bars = torch.cumprod(1 - self.betas * 0.9, 0)  # a product of other factors

    monkeypatch.setattr(ddpm.Schedule, "__init__", wrong)
    result = recipe.check_forward()
    assert not result["passed"] and result["detail"]["largest_recursion_difference"] > 1e-3


def test_the_loss_check_catches_a_loss_on_the_image_instead_of_the_noise(monkeypatch, model):
    def on_the_image(model, schedule, x0, t, noise):
        return (x0 - model(schedule.noised(x0, t, noise), t)).square().flatten(1).mean(1)

    monkeypatch.setattr(recipe, "simple_loss", on_the_image)
    result = recipe.check_loss(model)
    assert not result["passed"] and result["detail"]["largest_difference"] > 0.1


def test_the_posterior_check_catches_a_step_that_forgets_the_square_root(monkeypatch, model):
    """A mean divided by α_t for √α_t is not the posterior's mean at x̂_0."""
    def step_mean(s, x, eps, t):
        return original(s, x, eps, t) * s.alphas[t - 1].float().sqrt()

    original = recipe.step_mean
    monkeypatch.setattr(recipe, "step_mean", step_mean)
    result = recipe.check_posterior(model)
    assert not result["passed"] and result["detail"]["largest_difference"] > 1e-3


def test_the_held_out_check_catches_other_weights():
    broken = ddpm.build_model()
    with torch.no_grad():
        broken.conv_out.bias += 0.01
    assert not recipe.check_held_out(broken)["passed"]


def test_the_recorded_cases():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    sample = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in cases["sample"][part]}
    assert len(sample["chain"]["values"]) == STEPS + 1 and sample["chain"]["rows"][0] == "t = 100"
    assert len(sample["noise"]["values"]) == len(sample["step_loss"]["values"]) == STEPS
    assert sample["chain"]["values"][-1] == [v for row in sample["step_c0"]["values"] for v in row]
    split = {i["key"]: i for part in ("vectors", "metrics") for i in cases["test-split"][part]}
    by_t = split["loss_by_timestep"]["values"]
    assert len(by_t) == STEPS and by_t[0] > by_t[-1]  # the smallest noise is the hardest to tell from the strokes
    trained = float(weights.read(ddpm.WEIGHTS)[1]["test_loss"])
    assert abs(split["test_loss"]["value"] - trained) <= recipe.CLOSE  # as trained, to a float32 mean's last bits
    forward = {i["key"]: i for part in ("vectors", "metrics") for i in cases["forward"][part]}
    np.testing.assert_allclose(forward["signal"]["values"], np.sqrt(ALPHA_BARS), rtol=1e-6)


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    """`train.py --check` on the stored weights standing in for a retraining (which takes two minutes: README)."""
    pytest.importorskip("sklearn")
    assert train_check(train, training.Fitted(model, [])) == 0
    changed = ddpm.build_model()
    with torch.no_grad():
        changed.conv_in.bias[3] += 0.01
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_seed_always_draws_the_same_chain_and_another_seed_another(module_client):
    first = module_client.post("/api/models/ddpm/sample", json={"seed": 5}).get_json()["case"]
    again = module_client.post("/api/models/ddpm/sample", json={"seed": 5}).get_json()["case"]
    other = module_client.post("/api/models/ddpm/sample", json={"seed": 6}).get_json()["case"]
    chain = next(m for m in first["matrices"] if m["key"] == "chain")
    assert chain == next(m for m in again["matrices"] if m["key"] == "chain")
    assert chain["values"][-1] != next(m for m in other["matrices"] if m["key"] == "chain")["values"][-1]


def test_a_drawing_is_noised_to_the_step_asked_and_denoised_back(module_client):
    images, _ = digits.held_out()
    answer = module_client.post("/api/models/ddpm/denoise", json={"image": images[0].tolist(), "start": 12,
                                                                   "noise_seed": 4}).get_json()
    case = answer["case"]
    chain = next(m for m in case["matrices"] if m["key"] == "chain")
    assert len(chain["values"]) == 13 and chain["rows"][0] == "t = 12" and chain["rows"][-1] == "t = 0"
    metrics = {m["key"]: m["value"] for m in case["metrics"]}
    assert metrics["signal"] == pytest.approx(np.sqrt(ALPHA_BARS[11]), rel=1e-6) and metrics["start"] == 12
    assert metrics["distance"] < 3  # a little noise is taken away again: the 0 comes back


@pytest.mark.parametrize(("path", "body", "message"), [
    ("sample", {}, "seed: is required"),
    ("sample", {"seed": -1}, "seed: -1 is out of range 0..2147483647"),
    ("sample", {"seed": 1.5}, "seed: must be an integer, not float"),
    ("denoise", {"image": [[0] * 8] * 8, "start": 0}, "start: 0 is out of range 1..100"),
    ("denoise", {"image": [[0] * 8] * 8, "start": 101}, "start: 101 is out of range 1..100"),
    ("denoise", {"image": [[0] * 8] * 7}, "image: must hold exactly 8 rows, not 7"),
    ("denoise", {"image": [[0] * 8] * 8, "noise_seed": "x"}, "noise_seed: must be an integer, not str"),
])
def test_bad_requests_name_the_field(module_client, path, body, message):
    answer = module_client.post(f"/api/models/ddpm/{path}", json=body)
    assert answer.status_code == 400 and answer.get_json()["error"]["message"].startswith(message)


def test_the_held_out_check_allows_a_float32_means_last_bits_and_no_more(monkeypatch):
    trained = float(weights.read(recipe.WEIGHTS)[1]["test_loss"])
    for shift, passed in ((1.5e-8, True), (-1.5e-8, True), (1e-4, False)):  # 1.5e-8: two machines' sums seen
        monkeypatch.setattr(recipe, "held_out_loss", lambda model, images, value=trained + shift: value)
        result = recipe.check_held_out(None)
        assert result["passed"] is passed and result["detail"]["allowed"] == recipe.CLOSE, result
