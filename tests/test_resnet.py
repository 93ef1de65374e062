"""The ResNet recipe: its checks (each one broken), the graph's ReLU calls and residual additions, the
retraining command and its lab (its verification: tests/test_recordings.py)."""

import json

import pytest
import torch

from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT
from recipekit import digits, training

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "resnet"
MANIFEST = PROJECT_ROOT / "manifests" / "resnet" / "manifest.json"
resnet = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return resnet.build_model()


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_residual_check_catches_a_block_without_its_shortcut(monkeypatch):
    def forward(self, x):  # F(x) alone: a plain network, no shortcut added
        return self.relu2(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))

    monkeypatch.setattr(resnet.BasicBlock, "forward", forward)
    result = recipe.check_residual(resnet.build_model())
    assert not result["passed"] and result["detail"]["block1"]["max_difference"] > 1e-3


def test_batchnorm_check_catches_a_model_left_in_training_mode():
    """In training mode BatchNorm normalises by the batch's statistics: the answer for one digit then depends
    on the others read with it."""
    result = recipe.check_batchnorm(resnet.build_model().train())
    assert not result["passed"] and result["detail"]["max_difference"] > 1e-3


def test_accuracy_check_catches_other_weights():
    broken = resnet.build_model()
    with torch.no_grad():
        broken.fc.bias[7] += 3.0
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] < result["detail"]["at_training"]


def test_the_graph_shows_every_relu_call_and_every_addition_in_its_block():
    manifest = json.loads(MANIFEST.read_text())
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    edges = {(c["source"], c["target"]) for c in manifest["connections"]}
    assert {"relu", "block1.relu1", "block1.relu2", "block2.relu1", "block2.relu2"} <= set(layers)
    # The branch and the shortcut (the identity, or the projection's BatchNorm) meet at the addition, inside
    # the block, and the block's last ReLU reads it.
    for block, shortcut in (("block1", "block1.shortcut"), ("block2", "block2.shortcut.bn")):
        add = next(i for i in layers if i.startswith(f"add@{block}#"))
        assert layers[add]["parent"] == block
        assert {(f"{block}.bn2", add), (shortcut, add), (add, f"{block}.relu2")} <= edges


def test_the_recorded_digits_and_the_held_out_accuracy():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    metrics = {case_id: {m["key"]: m["value"] for m in c["metrics"]} for case_id, c in cases.items()}
    for case_id in ("zero", "three", "seven"):
        assert metrics[case_id]["prediction"] == metrics[case_id]["label"]
    assert metrics["misread"]["prediction"] != metrics["misread"]["label"]
    assert metrics["test-split"]["test_accuracy"] > 0.97 and metrics["test-split"]["test_size"] == digits.TEST_SIZE
    matrices = {m["key"]: m["values"] for m in cases["three"]["matrices"]}
    assert len(matrices["block1_branch"]) == 8 and len(matrices["block2_shortcut"]) == 16  # channel × position
    assert len(matrices["block2_branch"][0]) == 16  # 4 × 4 positions after the stride


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    """`train.py --check` on the stored weights standing in for a retraining (which takes 16 s: README)."""
    pytest.importorskip("sklearn")
    assert train_check(train, training.Fitted(model, [])) == 0
    changed = resnet.build_model()
    changed.block2.shortcut.bn.running_mean[3] += 0.01  # running statistics are stored, and compared, too
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_drawing_is_read_with_every_declared_stage_and_traced_exactly_at_the_last_layer(module_app):
    client = module_app.test_client()
    images, labels, _ = recipe.test_split()
    image = images[14].tolist()
    case = client.post("/api/models/resnet/runs", json={"image": image}).get_json()["case"]
    keys = {m["key"] for m in case["matrices"]}
    declared = [group["key"] for group in read_metadata(RECIPE)["display"]["groups"]]
    assert declared and all(f"{group}_c0" in keys for group in declared)  # every stage the page draws
    answer = client.post("/api/models/resnet/runs", json={"image": image}).get_json()
    assert [group["key"] for group in answer["groups"]] == declared  # grouped by the server, in order
    assert [m["index"] for m in answer["groups"][2]["maps"]] == list(range(16))
    assert "loss" not in {m["key"] for m in case["metrics"]}  # no class named, no loss
    trace = client.post("/api/models/resnet/trace", json={"image": image}).get_json()
    head = trace["stages"][0]
    assert trace["predicted"] == int(labels[14]) and head["check"] == pytest.approx(head["logit"], abs=1e-5)
    bad = client.post("/api/models/resnet/runs", json={"image": [[17] * 8] * 8})
    assert bad.status_code == 400 and bad.get_json()["error"]["message"].startswith("image[0][0]")
