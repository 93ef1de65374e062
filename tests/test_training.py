"""What training changed: every model that keeps weights from its training, run on each stage; the weights'
movement against the snapshots file read independently, the trained stage against the recording, the
swapped weights put back, bad requests and declarations refused, the cache and the budget."""

import json
import math
import tomllib

import pytest
import torch
from torch import nn

from app.compute.training_stages import NoModel, movement, weights_of
from app.domain.labs.fields import DeclarationError
from app.domain.training_stages import declared_training
from app.services.config import PROJECT_ROOT, TestConfig

from .conftest import CATALOG_SLUGS

URL = "/api/models/{}/training"


def declared(slug: str) -> dict:
    return tomllib.loads((PROJECT_ROOT / "recipes" / slug / "recipe.toml").read_text()).get("training", {})


TRAINED = [slug for slug in CATALOG_SLUGS if declared(slug).get("snapshots")]  # knobs alone keep no stages


def test_the_catalog_has_a_model_that_keeps_its_training():
    assert TRAINED  # else every test below would pass by running nothing


def kept_weights(slug: str) -> dict[str, dict[str, torch.Tensor]]:
    """The snapshots file read with the safetensors library, by stage."""
    from safetensors.torch import load_file

    tensors = load_file(str(PROJECT_ROOT / "recipes" / slug / declared(slug)["snapshots"]))
    stages: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        stage, name = key.split("/", 1)
        stages.setdefault(stage, {})[name] = value
    return stages


@pytest.mark.parametrize("slug", TRAINED)
def test_every_stage_runs_the_case_and_measures_movement_from_initialisation(client, slug):
    manifest = client.get(f"/api/models/{slug}").get_json()
    case = manifest["experiment"]["cases"][0]
    response = client.post(URL.format(slug), json={"case": case["id"]})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    kept = kept_weights(slug)
    assert sorted(s["id"] for s in body["stages"][:-1]) == sorted(kept) and body["stages"][-1]["id"] == "trained"
    first = body["stages"][0]
    assert first["weights"] and max(first["weights"].values()) == 0  # initialisation has not moved
    assert first["activations"] and max(first["activations"].values()) == 0
    start = kept[first["id"]]
    modules = {layer["id"] for layer in manifest["layers"]}
    for stage in body["stages"][1:-1]:  # weights in the file: the movement recomputed from it alone
        for node, moved in stage["weights"].items():
            assert node in modules
            names = [k for k in start if k.startswith(node + ".")]
            change = math.sqrt(sum(float((kept[stage["id"]][k] - start[k]).pow(2).sum()) for k in names))
            scale = math.sqrt(sum(float(start[k].pow(2).sum()) for k in names))
            assert moved == pytest.approx(change / scale, rel=1e-5), (stage["id"], node)
        assert max(stage["activations"].values()) > 0
    # The trained stage is the recorded model: its values are the recording's.
    trained = body["stages"][-1]["values"]
    for group, field in (("metrics", "value"), ("vectors", "values")):
        for item in case.get(group, []):
            assert trained[item["key"]] == pytest.approx(item[field], abs=1e-4), item["key"]
    assert set(body["items"]) == set(trained)


def test_a_stage_s_weights_are_put_back_after_the_run():
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    zeros = {k: torch.zeros_like(v) for k, v in trained.items()}
    with weights_of(zeros, "Sequential") as used:
        assert float(model(torch.ones(1, 3)).detach().abs().sum()) == 0  # ran on the stage's weights
    assert all(torch.equal(used[k], zeros[k]) for k in zeros)
    assert all(torch.equal(model.state_dict()[k], trained[k]) for k in trained)
    with pytest.raises(NoModel), weights_of(zeros, "Transformer"):
        model(torch.ones(1, 3))  # no module of that class ran: nothing could be swapped


def test_movement_counts_a_module_with_its_children():
    start = {"a.weight": torch.ones(2), "a.b.weight": torch.ones(2)}
    moved = movement({"a.weight": torch.ones(2), "a.b.weight": torch.full((2,), 3.0)}, start)
    assert moved["a.b"] == pytest.approx(2.0)  # |(2, 2)| / |(1, 1)|
    assert moved["a"] == pytest.approx(math.sqrt(8 / 4))  # both tensors together


@pytest.mark.parametrize("body, message", [
    ({"case": "nope"}, "case: must be one of the recorded cases"),
    ({}, "case: send either a recorded case or a request"),
    ({"request": {"image": 3}}, "request.image:"),
    ({"case": "zero", "extra": 1}, "extra: unknown field"),
    ({"case": "zero", "endpoint": "nope"}, "endpoint: must be one of"),
    ([1], "body: send a JSON object"),
])
def test_each_bad_request_is_a_400_naming_its_field(client, body, message):
    slug = TRAINED[0]
    response = client.post(URL.format(slug), json=body)
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(message)


def test_a_model_that_keeps_no_training_is_a_404(client):
    slug = next(s for s in CATALOG_SLUGS if not declared(s).get("snapshots"))
    response = client.post(URL.format(slug), json={"case": "x"})
    assert response.status_code == 404 and "keeps no weights" in response.get_json()["error"]["message"]


def test_stages_are_kept_by_what_they_depend_on_and_count_against_the_budget(make_app):
    app = make_app(type("Budget", (TestConfig,), {"COMPUTE_BUDGET": "2 per hour"}))
    client = app.test_client()
    slug = TRAINED[0]
    case = client.get(f"/api/models/{slug}").get_json()["experiment"]["cases"][0]["id"]
    cases = [c["id"] for c in client.get(f"/api/models/{slug}").get_json()["experiment"]["cases"]]
    first = client.post(URL.format(slug), json={"case": case}).get_json()
    again = client.post(URL.format(slug), json={"case": case}).get_json()
    assert (first["cached"], again["cached"]) == (False, True) and first["stages"] == again["stages"]
    assert client.post(URL.format(slug), json={"case": cases[1]}).status_code == 200  # the second run
    assert client.post(URL.format(slug), json={"case": case}).status_code == 200  # kept: spends nothing
    assert client.post(URL.format(slug), json={"case": cases[2]}).status_code == 429


@pytest.mark.parametrize("declaration, message", [
    ({"snapshots": "../weights.safetensors"}, "must be the name of a file"),
    ({"snapshots": "missing.safetensors"}, "cannot be read"),
    ({"snapshots": "bad.safetensors"}, "cannot be read"),
    ({"snapshots": "nostages.safetensors"}, "lists no stages"),
    ({"snapshots": "repeats.safetensors"}, "repeats a stage id"),
])
def test_a_bad_training_declaration_says_what_is_wrong(tmp_path, declaration, message):
    from safetensors.torch import save_file

    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    save_file({"epoch-0/w": torch.ones(1)}, str(tmp_path / "nostages.safetensors"))
    stages = json.dumps([{"id": "epoch-0", "label": "a"}, {"id": "epoch-0", "label": "b"}])
    save_file({"epoch-0/w": torch.ones(1)}, str(tmp_path / "repeats.safetensors"), metadata={"stages": stages})
    with pytest.raises(DeclarationError, match=message):
        declared_training(declaration, tmp_path)
