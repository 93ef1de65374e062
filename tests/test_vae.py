"""The VAE recipe: its checks (each one broken), the ELBO against torch.distributions, the trained LeNet
reading its reconstructions, the retraining command and its lab (its verification: tests/test_recordings.py)."""

import json
import re

import pytest
import torch
from torch import distributions

from app.services.config import PROJECT_ROOT
from recipekit import digits, training

from .conftest import LENET_RECIPE, recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "vae"
MANIFEST = PROJECT_ROOT / "manifests" / "vae" / "manifest.json"
vae = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return vae.build_model()


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_the_elbo_check_catches_a_code_sampled_with_the_variance_for_the_deviation(monkeypatch):
    """z = μ + σ²·ε instead of μ + σ·ε: the reconstruction term no longer matches the one written out."""
    def forward(self, x, noise=None):
        mean, logvar = self.encoder(x)
        z = mean if noise is None else mean + torch.exp(logvar) * noise
        return self.decoder(z), mean, logvar

    monkeypatch.setattr(vae.VAE, "forward", forward)
    result = recipe.check_elbo(vae.build_model())
    assert not result["passed"] and result["detail"]["largest_relative_difference"]["reconstruction"] > 1e-3


def test_the_elbo_check_catches_a_kl_term_that_forgets_the_one(monkeypatch):
    monkeypatch.setattr(vae, "kl_term", lambda mean, logvar: -0.5 * (logvar - mean.pow(2) - logvar.exp()).sum(1))
    result = recipe.check_elbo(vae.build_model())
    assert not result["passed"] and result["detail"]["largest_relative_difference"]["kl"] > 1e-3


def test_the_kl_check_catches_a_kl_that_is_not_zero_at_a_standard_normal(monkeypatch, model):
    monkeypatch.setattr(recipe, "kl_term", lambda mean, logvar: 0.5 * (mean.pow(2) + logvar.exp()).sum(1))
    result = recipe.check_kl(model)
    assert not result["passed"] and result["detail"]["standard_normal"] == 1.0


def test_the_held_out_check_catches_other_weights():
    broken = vae.build_model()
    with torch.no_grad():
        broken.decoder.out.bias += 0.5
    result = recipe.check_held_out(broken)
    assert not result["passed"] and result["detail"]["replayed"] > result["detail"]["at_training"]


def test_the_loss_terms_equal_torch_distributions(model):
    """The reference: a Bernoulli per pixel and the KL between two Normals, from torch.distributions, on the
    recorded digits with a sampled code."""
    images, _, _ = recipe.test_split()
    x = digits.pixels(images)
    noise = torch.randn(len(x), 2, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        loss, reconstruction, kl = vae.loss_terms(model, x, noise)
        mean, logvar = model.encoder(x)
        sigma = torch.exp(0.5 * logvar)
        p = model.decoder(mean + sigma * noise)
    bernoulli = distributions.Bernoulli(probs=p, validate_args=False)  # grey levels / 16 as soft targets
    want_reconstruction = -bernoulli.log_prob(x).flatten(1).sum(1)
    want_kl = distributions.kl_divergence(distributions.Normal(mean, sigma), distributions.Normal(0.0, 1.0)).sum(1)
    torch.testing.assert_close(reconstruction, want_reconstruction, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(kl, want_kl, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss, want_reconstruction + want_kl, rtol=1e-5, atol=1e-4)


def test_the_trained_lenet_reads_the_reconstructions_of_held_out_digits_at_the_rate_the_readme_states(model):
    """The VAE decodes each held-out digit from its code's mean; the LeNet recipe's trained network reads the
    reconstruction (probability of ink × 16, its grey levels) as a digit, which should be the digit drawn."""
    lenet = recipe_module(LENET_RECIPE, "model")
    reader = lenet.build_model()
    images, labels, _ = recipe.test_split()
    with torch.no_grad():
        reconstructions = recipe.decode(model, model.encoder(digits.pixels(images))[0])
        rate = (reader(digits.pixels(reconstructions)).argmax(-1) == labels).float().mean().item()
        originals = (reader(digits.pixels(images)).argmax(-1) == labels).float().mean().item()
    assert 0.75 < rate < originals  # blurred by a 2-D code, but mostly still the digit drawn
    read = round(rate * len(labels))
    stated = f"{read} of {len(labels)} ({rate:.1%})"
    for readme in (RECIPE / "README.md", PROJECT_ROOT / "README.md"):
        assert stated in " ".join(readme.read_text().replace("**", "").split()), (readme, stated)


def test_the_recorded_cases(model):
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    three = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in cases["three"][part]}
    assert three["loss"]["value"] == pytest.approx(three["reconstruction_term"]["value"] + three["kl"]["value"])
    assert len(three["mean"]["values"]) == len(three["sigma"]["values"]) == 2
    path = next(m["values"] for m in cases["between"]["matrices"] if m["key"] == "path")
    assert len(path) == 8 and len(path[0]) == 8 * recipe.STEPS  # eight 8 x 8 images side by side
    codes = next(m["values"] for m in cases["between"]["matrices"] if m["key"] == "codes")
    assert codes[0] == pytest.approx(three["mean"]["values"])  # the walk starts at the 3's code
    split = {m["key"]: m["value"] for m in cases["test-split"]["metrics"]}
    assert split["test_loss"] == pytest.approx(split["test_reconstruction"] + split["test_kl"])
    plane = next(m["values"] for m in cases["test-split"]["matrices"] if m["key"] == "latent_map")
    assert len(plane) == len(plane[0]) == 8 * recipe.MAP_STEPS


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    """`train.py --check` on the stored weights standing in for a retraining (which takes 26 s: README)."""
    pytest.importorskip("sklearn")
    assert train_check(train, training.Fitted(model, [])) == 0
    changed = vae.build_model()
    with torch.no_grad():
        changed.encoder.logvar.bias[1] += 0.01
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def same(image, other) -> None:
    torch.testing.assert_close(torch.tensor(image), torch.tensor(other), rtol=0, atol=1e-5)


def test_a_drawing_is_encoded_decoded_and_walked_to_another(module_client, model):
    images, _, _ = recipe.test_split()
    three, seven = images[14].tolist(), images[5].tolist()
    case = module_client.post("/api/models/vae/runs", json={"image": three}).get_json()["case"]
    mean = next(v["values"] for v in case["vectors"] if v["key"] == "mean")
    decoded = module_client.post("/api/models/vae/decode", json={"code": mean}).get_json()
    reconstruction = next(m["values"] for m in case["matrices"] if m["key"] == "reconstruction")
    same(decoded["image"], reconstruction)  # decoding the mean is the reconstruction
    path = module_client.post("/api/models/vae/between", json={"a": three, "b": seven, "steps": 5}).get_json()
    assert len(path["codes"]) == len(path["images"]) == 5
    assert path["codes"][0] == pytest.approx(mean) and path["codes"][-1] == pytest.approx(path["ends"][1])
    plane = module_client.get("/api/models/vae/plane?steps=3&extent=1").get_json()
    assert plane["axis"] == [-1.0, 0.0, 1.0] and len(plane["images"]) == 3 and len(plane["images"][0][0]) == 8
    origin = module_client.post("/api/models/vae/decode", json={"code": [0, 0]}).get_json()["image"]
    same(plane["images"][1][1], origin)  # the map's centre is the code (0, 0)
    assert all(0 <= v <= 16 for row in origin for v in row)


@pytest.mark.parametrize(("method", "path", "body", "message"), [
    ("post", "decode", {"code": [0.0, 0.0, 0.0]}, "code: must hold exactly 2 values, not 3"),
    ("post", "decode", {"code": [5, 0]}, "code[0]: 5 is out of range -4..4"),
    ("post", "decode", {"code": ["a", 0]}, "code[0]: must be a number, not str"),
    ("post", "decode", {"code": 1.5}, "code: must be a list of numbers"),
    ("post", "between", {"a": [[0] * 8] * 8}, "b: is required"),
    ("post", "between", {"a": [[0] * 8] * 8, "b": [[0] * 8] * 8, "steps": 40}, "steps: 40 is out of range 2..16"),
    ("get", "plane?steps=1", None, "steps: 1 is out of range 2..15"),
    ("get", "plane?extent=x", None, "extent: must be a number, not 'x'"),
])
def test_bad_requests_name_the_field(module_client, method, path, body, message):
    answer = getattr(module_client, method)(f"/api/models/vae/{path}", **({"json": body} if body is not None else {}))
    assert answer.status_code == 400 and answer.get_json()["error"]["message"].startswith(message)


def test_a_code_travels_in_a_query_as_comma_separated_numbers():
    from app.domain.labs.fields import declared_field, parse_query, validate

    field = declared_field("code", {"type": "numbers", "length": 2, "min": -4, "max": 4}, {}, "test")
    assert validate(parse_query({"code": ["0.5,-1.25"]}, {"code": field}), {"code": field}) == {"code": [0.5, -1.25]}
    assert field.json_schema()["items"] == {"type": "number", "minimum": -4, "maximum": 4}
    with pytest.raises(ValueError, match=re.escape("code: must be comma-separated numbers, not '0.5,x'")):
        parse_query({"code": ["0.5,x"]}, {"code": field})
