"""The graph convolutional network recipe against an independent computation (Â and both layers written again in
NumPy from the edge list), its checks (each one broken), the graph against networkx's, the retraining command and
its lab (its verification: tests/test_recordings.py)."""

import json

import numpy as np
import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "gcn"
MANIFEST = PROJECT_ROOT / "manifests" / "gcn" / "manifest.json"
gcn = recipe_module(RECIPE, "model")
data = recipe_module(RECIPE, "data")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return gcn.build_model()


def numpy_layers(edges: list[list[int]], w1: np.ndarray, w2: np.ndarray) -> tuple[np.ndarray, ...]:
    """Â = D̃^-½ (A + I) D̃^-½ from the edge list, H = ReLU(Â I W1ᵀ), Z = Â H W2ᵀ: Kipf & Welling's eq. 9 in NumPy."""
    a = np.eye(34)
    for i, j in edges:
        a[i, j] = a[j, i] = 1.0
    d = a.sum(1) ** -0.5
    normalised = d[:, None] * a * d[None, :]
    hidden = np.maximum(normalised @ w1.T, 0)
    return normalised, hidden, normalised @ hidden @ w2.T


def test_both_layers_match_numpy_value_by_value(model):
    edges = data.karate()["edges"].tolist()
    w1, w2 = (m.linear.weight.detach().double().numpy() for m in (model.conv1, model.conv2))
    normalised, hidden, scores = numpy_layers(edges, w1, w2)
    with torch.no_grad():
        a_hat = model.normalise(gcn.adjacency(edges))
        ours = model.relu(model.conv1(gcn.features(), a_hat))
        out = model(gcn.features(), gcn.adjacency(edges))
    np.testing.assert_allclose(a_hat.numpy(), normalised, atol=1e-7)
    np.testing.assert_allclose(ours.numpy(), hidden, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), scores, atol=1e-6)


def test_the_stored_graph_is_networkx_s_karate_club():
    networkx = pytest.importorskip("networkx")
    graph = networkx.karate_club_graph()
    stored = data.karate()
    assert {tuple(e) for e in stored["edges"].tolist()} == {tuple(sorted(e)) for e in graph.edges()}
    assert [data.SIDES[s] for s in stored["sides"].tolist()] == [graph.nodes[m]["club"] for m in range(34)]
    assert torch.equal(torch.bincount(stored["edges"].flatten())[[0, 33]], torch.tensor([16, 17]))  # the leaders
    assert stored["layout"].abs().max().item() == pytest.approx(1.0)


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_the_sparse_check_catches_a_normalisation_without_self_loops(monkeypatch, model):
    def without_loops(self, adjacency):
        scale = adjacency.sum(1).clamp(min=1).rsqrt()
        return scale[:, None] * adjacency * scale[None, :]

    monkeypatch.setattr(gcn.Normalise, "forward", without_loops)
    result = recipe.check_sparse(model)
    assert not result["passed"] and result["detail"]["largest_difference"]["normalised"] > 0.1


def test_the_spectrum_check_catches_a_row_normalisation(monkeypatch, model):
    """D̃⁻¹(A + I) has the eigenvalue 1 too, but it is not symmetric and its eigenvector is not √d̃."""
    def by_rows(self, adjacency):
        joined = adjacency + torch.eye(adjacency.shape[0])
        return joined / joined.sum(1, keepdim=True)

    monkeypatch.setattr(gcn.Normalise, "forward", by_rows)
    result = recipe.check_spectrum(model)
    assert not result["passed"] and result["detail"]["asymmetry"] > 0


def test_the_held_and_retrain_checks_catch_other_weights():
    broken = gcn.build_model()
    with torch.no_grad():
        broken.conv2.linear.weight[:, 8] = torch.tensor([5.0, -5.0])  # hidden unit 8 votes hard for Mr. Hi's side
    assert not recipe.check_retrain(broken)["passed"]
    held = recipe.check_held(broken)
    assert not held["passed"] and held["detail"]["replayed"] != held["detail"]["at_training"]


def test_the_recorded_cases():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    items = {c: {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in cases[c][part]} for c in cases}
    club, cut = items["club"], items["cut"]
    assert club["right"]["value"] == 31 and club["predicted"]["values"][8] == 1 and club["sides"]["values"][8] == 0
    assert cut["right"]["value"] == 32 and cut["predicted"]["values"][8] == 0 and len(cut["edges"]["values"]) == 77
    assert club["probabilities"]["rows"][0] == "Mr. Hi" and club["probabilities"]["columns"] == ["Mr. Hi's side",
                                                                                                  "Officer's side"]
    assert len(club["training_loss"]["values"]) == train.EPOCHS


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    assert train_check(train, training.Fitted(model, [])) == 0
    changed = gcn.build_model()
    with torch.no_grad():
        changed.conv1.linear.weight[0, 0] += 0.01
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_the_lab_trains_on_the_graph_it_is_given_and_the_members_given(module_client):
    edges = data.karate()["edges"].tolist()
    asked = module_client.post("/api/models/gcn/runs", json={"edges": edges}).get_json()
    assert asked["request"]["given"] == [0, 33]  # the default: the two leaders
    club = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in asked["case"][part]}
    assert club["right"]["value"] == 31
    alone = [[a, b] for a, b in edges if 24 not in (a, b)] + [[24, 0]]  # member 24's friends all replaced by Mr. Hi
    moved = module_client.post("/api/models/gcn/runs", json={"edges": alone}).get_json()["case"]
    predicted = next(v["values"] for v in moved["vectors"] if v["key"] == "predicted")
    assert predicted[24] == 0  # now on Mr. Hi's side
    swapped = module_client.post("/api/models/gcn/runs", json={"edges": edges, "given": [33, 0]}).get_json()["case"]
    flipped = next(v["values"] for v in swapped["vectors"] if v["key"] == "predicted")
    assert sum(a != b for a, b in zip(flipped, club["predicted"]["values"], strict=True)) >= 30  # the sides swap


@pytest.mark.parametrize(("body", "message"), [
    ({}, "edges: is required"),
    ({"edges": [[0, 0]]}, "edges[0]: joins 0 to itself"),
    ({"edges": [[0, 34]]}, "edges[0][1]: 34 is out of range 0..33"),
    ({"edges": [[0, 1], [1, 0]]}, "edges[1]: repeats edges[0]"),
    ({"edges": [[0, 1]], "given": [3, 3]}, "given: names a value twice"),
    ({"edges": [[0, 1]], "given": [3]}, "given: must hold exactly 2 values, not 1"),
])
def test_bad_requests_name_the_field(module_client, body, message):
    answer = module_client.post("/api/models/gcn/runs", json=body)
    assert answer.status_code == 400 and answer.get_json()["error"]["message"].startswith(message)
