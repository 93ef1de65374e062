"""The Vision Transformer recipe: its checks (each one broken), the graph's class token, positions and
attention, the retraining command and its lab (its verification: tests/test_recordings.py)."""

import json
import math

import pytest
import torch

from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT
from recipekit import digits, training

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "vit"
MANIFEST = PROJECT_ROOT / "manifests" / "vit" / "manifest.json"
vit = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return vit.build_model()


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


@pytest.mark.parametrize("scale", [lambda head_dim: head_dim, lambda head_dim: 1.0])
def test_attention_check_catches_scores_scaled_otherwise_than_by_the_root_of_the_head_width(monkeypatch, scale):
    """By d_k instead of √d_k, or not at all: torch.nn.MultiheadAttention, fed the same weights, disagrees."""
    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        weights = self.softmax(q @ k.transpose(-2, -1) / scale(q.size(-1)))
        return self.out((weights @ v).transpose(1, 2).reshape(x.shape))

    monkeypatch.setattr(vit.SelfAttention, "forward", forward)
    result = recipe.check_attention(vit.build_model())
    assert not result["passed"] and result["detail"]["blocks.0"]["weights_difference"] > 1e-3


def test_attention_check_catches_a_head_reading_another_heads_values(monkeypatch):
    """Heads that mix their columns up (a wrong split) give other outputs with the same weights."""
    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        weights = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))
        return self.out((weights @ v.roll(1, dims=1)).transpose(1, 2).reshape(x.shape))

    monkeypatch.setattr(vit.SelfAttention, "forward", forward)
    result = recipe.check_attention(vit.build_model())
    assert not result["passed"] and result["detail"]["blocks.0"]["output_difference"] > 1e-3


def test_accuracy_check_catches_other_weights():
    broken = vit.build_model()
    with torch.no_grad():
        broken.head.bias[5] += 3.0
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] < result["detail"]["at_training"]


def test_patches_are_cut_row_by_row_and_each_read_row_by_row():
    image = torch.arange(64.0).view(1, 1, 8, 8)
    patches = vit.patchify(image, 2)[0]
    assert patches.shape == (16, 4)
    assert patches[0].tolist() == [0, 1, 8, 9] and patches[1].tolist() == [2, 3, 10, 11]
    assert patches[4].tolist() == [16, 17, 24, 25]  # the second row of patches


def test_the_graph_shows_the_class_token_the_positions_and_every_attention():
    manifest = json.loads(MANIFEST.read_text())
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    edges = {(c["source"], c["target"]) for c in manifest["connections"]}
    assert layers["cat@ViT#0"]["op"] == "torch.cat" and layers["add@ViT#0"]["op"] == "Tensor.add"
    assert {("embed", "cat@ViT#0"), ("cat@ViT#0", "add@ViT#0")} <= edges  # the class token before the patches
    for block in ("blocks.0", "blocks.1"):
        assert layers[f"{block}.attn.softmax"]["parent"] == f"{block}.attn"
        adds = [i for i in layers if i.startswith(f"add@{block}#")]
        assert len(adds) == 2  # pre-LN: attention and MLP each added back to the stream
    steps = {step["id"]: step["target"] for step in manifest["steps"]}
    assert steps["cls"] == "cat@ViT#0" and steps["positions"] == "add@ViT#0"


def test_the_recorded_digits_their_attention_maps_and_the_held_out_accuracy():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    metrics = {case_id: {m["key"]: m["value"] for m in c["metrics"]} for case_id, c in cases.items()}
    for case_id in ("zero", "three", "seven", "two"):
        assert metrics[case_id]["prediction"] == metrics[case_id]["label"]
    assert metrics["misread"]["prediction"] != metrics["misread"]["label"]
    assert metrics["test-split"]["test_accuracy"] > 0.96 and metrics["test-split"]["test_size"] == digits.TEST_SIZE
    matrices = {m["key"]: m["values"] for m in cases["three"]["matrices"]}
    to_itself = next(v["values"] for v in cases["three"]["vectors"] if v["key"] == "cls_to_itself")
    for layer in range(2):
        for head in range(4):
            grid = matrices[f"attn{layer}_c{head}"]
            assert len(grid) == len(grid[0]) == 4  # the 4 x 4 patch grid
            # The class token's row of weights: the patches' share and its own make 1.
            assert sum(map(sum, grid)) + to_itself[layer * 4 + head] == pytest.approx(1, abs=1e-5)


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    """`train.py --check` on the stored weights standing in for a retraining (which takes 40 s: README)."""
    pytest.importorskip("sklearn")
    assert train_check(train, training.Fitted(model, [])) == 0
    changed = vit.build_model()
    with torch.no_grad():
        changed.cls[0, 0, 3] += 0.01
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_drawing_is_read_with_every_declared_stage_and_traced_exactly_at_the_head(module_app):
    client = module_app.test_client()
    images, labels, _ = recipe.test_split()
    image = images[14].tolist()
    case = client.post("/api/models/vit/runs", json={"image": image}).get_json()["case"]
    keys = {m["key"] for m in case["matrices"]}
    groups = read_metadata(RECIPE)["display"]["groups"]
    assert groups and all(f"{group['key']}_c3" in keys and group["over"] in keys for group in groups)
    assert "loss" not in {m["key"] for m in case["metrics"]}  # no class named, no loss
    trace = client.post("/api/models/vit/trace", json={"image": image, "target": 8}).get_json()
    head = trace["stages"][0]
    assert trace["target"] == 8 and trace["predicted"] == int(labels[14])
    assert head["check"] == pytest.approx(head["logit"], abs=1e-5)
    assert [s["shape"] for s in trace["stages"][1:]] == [[17, 32]] * 4 + [[8, 8]]  # 4 writes, then the pixels
    bad = client.post("/api/models/vit/runs", json={"image": [[0] * 8] * 7})
    assert bad.status_code == 400 and bad.get_json()["error"]["message"].startswith("image")
