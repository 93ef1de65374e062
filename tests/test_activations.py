"""What every node computes: every model's graph drawn on its first case, a drawing checked value by value against
the recipe's own model run by hand, the bounds of a drawing and of an answer, and every bad request a 400."""

import pytest
import torch
from torch import nn

from app.compute.activations import BUDGET, LARGE, SMALL, activations, drawing
from app.services.extensions import models

from .conftest import CATALOG_SLUGS, PROJECT_ROOT, lab_subject, recipe_module

URL = "/api/models/{}/activations"


def subject(app, slug: str) -> tuple[dict, dict, bool]:
    """The first case (or example request), the manifest, and whether the run's model is a checkpoint's."""
    with app.app_context():
        model = models.get(slug)
        return lab_subject(model), model.manifest, model.checkpoint is not None


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_every_model_draws_its_graphs_nodes_on_its_first_case(packaged_app, slug):
    body, manifest, checkpoint = subject(packaged_app, slug)
    answer = packaged_app.test_client().post(URL.format(slug), json=body)
    assert answer.status_code == 200, answer.get_json()
    nodes = answer.get_json()["nodes"]
    kinds = {layer["id"]: layer["kind"] for layer in manifest["layers"]}
    assert set(nodes) <= set(kinds), set(nodes) - set(kinds)  # the graph's nodes alone
    output = next(i for i, kind in kinds.items() if kind == "output")
    feeding = next(edge["source"] for edge in manifest["connections"] if edge["target"] == output)
    if not (checkpoint and "@" in feeding):  # transformers' model, of another class, ending in an op: no module
        assert "drawing" in nodes[output] and nodes[output]["shape"]
    assert sum(1 for node in nodes.values() if "drawing" in node) >= 3
    assert sum(len(node["drawing"]["values"]) for node in nodes.values() if "drawing" in node) <= BUDGET + 4096
    for node in nodes.values():
        if "drawing" in node:
            assert node["drawing"]["of"] == node["shape"]


def test_lenets_feature_maps_are_its_convolutions_output_value_by_value(client):
    """The recipe's LeNet run by hand on the case's digit: the large drawing of stage1.conv is its output."""
    answer = client.post(URL.format("lenet"), json={"case": "zero", "node": "stage1.conv"}).get_json()
    assert list(answer["nodes"]) == ["stage1.conv"]
    shown = answer["nodes"]["stage1.conv"]
    assert shown["shape"] == [1, 6, 8, 8] and shown["input_shape"] == [1, 1, 8, 8]
    drawn = shown["drawing"]
    assert drawn["kind"] == "maps" and drawn["shape"] == [6, 8, 8] and not drawn["pooled"]  # LARGE holds all 6
    model_py = recipe_module(PROJECT_ROOT / "recipes" / "lenet", "model")
    run_py = recipe_module(PROJECT_ROOT / "recipes" / "lenet", "run")
    model = model_py.build_model().eval()
    images, _, _ = run_py.test_split()
    digit = run_py.pixels(images[run_py.DIGITS["zero"]].tolist())  # the case's held-out digit, as the recipe reads it
    with torch.no_grad():
        expected = model.stage1.conv(digit)[0].reshape(-1).tolist()
    assert drawn["values"] == pytest.approx(expected, rel=1e-3, abs=1e-4)
    assert drawn["low"] == pytest.approx(min(expected), rel=1e-3, abs=1e-4)
    assert drawn["high"] == pytest.approx(max(expected), rel=1e-3, abs=1e-4)


def test_another_case_draws_another_picture_and_a_second_ask_is_kept(client):
    zero = client.post(URL.format("lenet"), json={"case": "zero"}).get_json()
    others = [c["id"] for c in client.get("/api/models/lenet").get_json()["experiment"]["cases"] if c["id"] != "zero"]
    other = client.post(URL.format("lenet"), json={"case": others[0]}).get_json()
    assert zero["nodes"]["input:x"]["drawing"]["values"] != other["nodes"]["input:x"]["drawing"]["values"]
    assert zero["nodes"]["output"]["drawing"]["values"] != other["nodes"]["output"]["drawing"]["values"]
    again = client.post(URL.format("lenet"), json={"case": "zero"}).get_json()
    assert again["cached"] and again["nodes"] == zero["nodes"]


def test_a_lab_request_is_drawn_as_the_lab_runs_it(client):
    """The MLP's point lab: the input drawn is the learner's point."""
    answer = client.post(URL.format("mlp"), json={"request": {"x1": 0.25, "x2": 0.75}, "endpoint": "runs"})
    assert answer.status_code == 200, answer.get_json()
    drawn = answer.get_json()["nodes"]["input:x"]["drawing"]
    assert 0.25 in drawn["values"] and 0.75 in drawn["values"]


def test_a_container_never_called_shows_its_last_blocks_output(client):
    answer = client.post(URL.format("gpt"), json={"case": client.get("/api/models/gpt").get_json()["experiment"]
                                                  ["cases"][0]["id"]}).get_json()
    blocks = answer["nodes"]["h"]
    assert blocks["from_part"].startswith("h.") and blocks["from_part"].count(".") == 1
    assert blocks["drawing"] == answer["nodes"][blocks["from_part"]]["drawing"]


def test_a_drawing_is_bounded_and_averages_blocks_down():
    maps = torch.arange(2 * 8 * 16 * 16, dtype=torch.float32).reshape(2, 8, 16, 16)
    small = drawing(maps, SMALL)
    assert small["kind"] == "maps" and small["shape"] == [SMALL.channels, SMALL.side, SMALL.side] and small["pooled"]
    first = maps[0, 0]  # the first item's first channel, 2×2 blocks averaged
    assert small["values"][0] == pytest.approx(float(first[:2, :2].mean()), rel=1e-3)
    assert small["of"] == [2, 8, 16, 16] and small["low"] == 0
    assert drawing(torch.randn(1, 300), LARGE)["shape"] == [LARGE.bins]
    assert drawing(torch.randn(1, 5, 300), SMALL)["shape"] == [5, SMALL.bins]
    assert drawing(torch.tensor([[3, 1, 4]]), SMALL) == {"kind": "ids", "values": [3, 1, 4], "of": [1, 3],
                                                         "pooled": False}
    assert drawing(torch.tensor([float("nan"), 1.0]), SMALL)["values"] == [None, 1.0]
    assert drawing(torch.tensor(2.5), SMALL)["kind"] == "value"


class Many(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(400))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def test_an_answer_holds_at_most_its_budget_of_numbers_and_every_node_its_shape():
    model = Many()
    found = activations(lambda x: model(x), {"x": torch.randn(1, 64, 256)}, 0, "Many", {}, [])
    assert len(found) == 401 and all(entry["shape"] == [1, 64, 256] for entry in found.values())
    drawn = [entry for entry in found.values() if "drawing" in entry]
    assert 0 < len(drawn) < 401
    assert sum(len(entry["drawing"]["values"]) for entry in drawn) <= BUDGET + SMALL.side * SMALL.bins


@pytest.mark.parametrize(("body", "field"), [
    ({"case": "zero", "node": "nowhere"}, "node"),
    ({"case": "zero", "node": "flatten@LeNet#0"}, "node"),
    ({"case": "zero", "node": 3}, "node"),
    ({"case": "zero", "node": {"id": "fc1"}}, "node"),
    ({"case": "zero", "request": {}}, "case"),
    ({}, "case"),
    ({"case": "no-such-case"}, "case"),
    ({"case": "zero", "colour": "red"}, "colour"),
    ([1, 2], "body"),
])
def test_every_bad_request_is_a_400_naming_its_field(client, body, field):
    answer = client.post(URL.format("lenet"), json=body)
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["error"]["message"].startswith(field), answer.get_json()


def test_an_unknown_model_is_a_404(client):
    assert client.post(URL.format("no-such-model"), json={"case": "zero"}).status_code == 404
