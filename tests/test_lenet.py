"""The LeNet recipe: its trained weights, its checks (each one broken), training, verification and its lab."""

import json

import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import digits, training
from recipekit import weights as stored

from .conftest import LENET_RECIPE, kept_stages, largest_stage_difference, recipe_module

lenet = recipe_module(LENET_RECIPE, "model")
recipe = recipe_module(LENET_RECIPE, "run")
lab = recipe_module(LENET_RECIPE, "lab")
train = recipe_module(LENET_RECIPE, "train")
LENET_MANIFEST = PROJECT_ROOT / "manifests" / "lenet" / "manifest.json"


@pytest.fixture(scope="module")
def model():
    return lenet.build_model()


@pytest.fixture(scope="module")
def split():
    images, labels, metadata = recipe.test_split()
    return images, labels, metadata


def reference_forward(state: dict, x: torch.Tensor) -> torch.Tensor:
    """The same network written out with torch.nn.functional from the stored tensors alone."""
    def stage(x, prefix):
        conv = torch.nn.functional.conv2d(x, state[f"{prefix}.conv.weight"], state[f"{prefix}.conv.bias"], padding=1)
        y = torch.tanh(conv)
        B, C, H, W = y.shape
        return y.reshape(B, C, H // 2, 2, W // 2, 2).mean((3, 5))

    h = stage(stage(x, "stage1"), "stage2").flatten(1)
    h = torch.tanh(h @ state["fc1.weight"].T + state["fc1.bias"])
    return h @ state["fc2.weight"].T + state["fc2.bias"]


def test_the_model_equals_a_functional_reference_on_every_test_digit(model, split):
    images, _, _ = split
    state, _ = stored.read(lenet.WEIGHTS)
    with torch.no_grad():
        torch.testing.assert_close(model(digits.pixels(images)), reference_forward(state, digits.pixels(images)),
                                   rtol=0, atol=1e-5)


def test_the_test_split_is_scikit_learns_digits_unchanged(split):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    images, labels, _ = split
    kept, _ = stored.read(digits.HELD_OUT)
    every = load_digits()
    indices = kept["test_indices"].tolist()
    assert len(indices) == 360 and len(set(indices)) == 360
    assert torch.equal(images, torch.tensor(every.images[indices], dtype=torch.uint8))
    assert labels.tolist() == every.target[indices].tolist()


# ---- the recipe's checks, and each one broken


def test_checks_pass_on_the_stored_weights(model):
    for name, check in recipe.CHECKS.items():
        assert check(model)["passed"], name


class PositionBias(torch.nn.Module):
    """A convolution that also adds a different number at every column: no longer shift-equivariant."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv
        self.in_channels = conv.in_channels

    def forward(self, x):
        return self.conv(x) + 0.1 * torch.arange(x.size(-1), dtype=x.dtype)


def test_shift_check_catches_a_position_dependent_filter():
    broken = lenet.build_model()
    broken.stage1.conv = PositionBias(broken.stage1.conv)
    result = recipe.check_shift(broken)
    assert not result["passed"] and result["detail"]["stage1.conv"]["max_difference"] > 0.05


@pytest.mark.parametrize("pool", [torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(1)], ids=["max", "no-halving"])
def test_pooling_check_catches_another_pooling(pool):
    broken = lenet.build_model()
    broken.stage2.pool = pool
    broken.fc1 = torch.nn.LazyLinear(32)  # the flattened size changes with the pooling
    assert not recipe.check_pooling(broken)["passed"]


def test_probability_check_catches_a_corrupt_weight():
    broken = lenet.build_model()
    with torch.no_grad():
        broken.fc2.bias[3] = float("nan")
    result = recipe.check_probabilities(broken)
    assert not result["passed"]


def test_accuracy_check_catches_other_weights():
    broken = lenet.build_model()
    with torch.no_grad():
        broken.fc2.weight.add_(0.5 * torch.randn(broken.fc2.weight.shape, generator=torch.Generator().manual_seed(0)))
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] != result["detail"]["at_training"]


# ---- training


# Retraining all 50 epochs takes seconds per epoch on a shared machine (`train.py --check` does, README): the
# test retrains the first epochs, which must pass exactly through the stages stored on the way.
RETRAINED_EPOCHS = 4


def test_training_from_the_seed_passes_through_the_stored_stages(monkeypatch, split):
    pytest.importorskip("sklearn")
    snapshots = train.train(digits.split(), train.RECORDED | {"epochs": RETRAINED_EPOCHS}).snapshots
    kept = kept_stages(lenet.SNAPSHOTS)
    assert sorted(snapshots) == [e for e in train.SNAPSHOT_EPOCHS if e < RETRAINED_EPOCHS] == [0, 1, 3]
    worst, where = largest_stage_difference(snapshots, kept)
    assert worst <= train.RETRAIN_TOLERANCE, where
    _, metadata = stored.read(lenet.WEIGHTS)
    images, labels, _ = split
    assert train.accuracy(lenet.build_model(), images, labels) == float(metadata["test_accuracy"])


def test_train_check_fails_when_the_stored_weights_differ(tmp_path, monkeypatch, capsys, train_check):
    """`train.py --check` with the stored weights and stages standing in for its retraining: 0 for the stored
    files, 1 with one kept stage changed by 0.01, which it names as the largest difference."""
    from safetensors.torch import save_file

    pytest.importorskip("sklearn")
    retrained = training.Fitted(lenet.build_model(), [], snapshots=kept_stages(lenet.SNAPSHOTS))
    assert train_check(train, retrained) == 0
    # One stage kept on the way is changed: the check compares every stored tensor, the stages' and the
    # trained weights', in one pass.
    state, metadata = stored.read(lenet.SNAPSHOTS)
    state["epoch-3/fc1.bias"] = state["epoch-3/fc1.bias"] + 0.01
    save_file(state, str(tmp_path / "snapshots.safetensors"), metadata=metadata)
    monkeypatch.setattr(train, "SNAPSHOTS", tmp_path / "snapshots.safetensors")
    assert train_check(train, retrained) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the recording and its verification


def test_recorded_accuracy_equals_the_replayed_one_and_the_training_one(model, split):
    manifest = json.loads(LENET_MANIFEST.read_text())
    cases = {c["id"]: c for c in manifest["experiment"]["cases"]}
    recorded = {m["key"]: m["value"] for m in cases["test-split"]["metrics"]}
    replayed = {m["key"]: m["value"] for m in recipe.test_case(model)["metrics"]}
    _, _, metadata = split
    assert recorded["test_accuracy"] == replayed["test_accuracy"]
    assert recorded["test_accuracy"] == pytest.approx(float(metadata["test_accuracy"]), abs=1e-7)
    assert recorded["test_accuracy"] > 0.95
    confusion = next(m for m in cases["test-split"]["matrices"] if m["key"] == "confusion")["values"]
    assert sum(map(sum, confusion)) == 360
    assert sum(confusion[i][i] for i in range(10)) == round(recorded["test_accuracy"] * 360)


def test_the_recorded_digits_hold_a_correct_and_a_misread_one():
    manifest = json.loads(LENET_MANIFEST.read_text())
    outcomes = {}
    for case in manifest["experiment"]["cases"]:
        metrics = {m["key"]: m["value"] for m in case["metrics"]}
        if "prediction" in metrics:
            outcomes[case["id"]] = metrics["prediction"] == metrics["label"]
            keys = [m["key"] for m in case["matrices"]]
            assert keys[0] == "image" and keys[-1] == "saliency"
            assert sum(k.startswith("stage1_act_c") for k in keys) == 6
            assert sum(k.startswith("stage2_pool_c") for k in keys) == 16
    assert outcomes == {"zero": True, "three": True, "seven": True, "misread": False}


def test_the_served_files_include_the_weights_and_the_training(module_app):
    body = module_app.test_client().get("/api/models/lenet/files").get_json()
    files = {f["name"]: f for f in body["files"]}
    for name in ("weights.safetensors", "snapshots.safetensors", "train.py"):
        assert files[name]["matches_recording"], name
    response = module_app.test_client().get(files["weights.safetensors"]["url"])
    assert response.status_code == 200 and response.mimetype == "application/octet-stream"
    assert response.data == lenet.WEIGHTS.read_bytes()


def test_each_stage_of_training_predicts_as_the_functional_reference_on_its_kept_weights(module_app, split):
    body = module_app.test_client().post("/api/models/lenet/training", json={"case": "misread"}).get_json()
    kept, _ = stored.read(lenet.SNAPSHOTS)
    trained, _ = stored.read(lenet.WEIGHTS)
    x = digits.pixels(torch.tensor([digit(split, 345)]))
    for stage in body["stages"]:
        state = trained if stage["id"] == "trained" else \
            {k.split("/", 1)[1]: v for k, v in kept.items() if k.startswith(stage["id"] + "/")}
        probabilities = reference_forward(state, x).softmax(-1)[0]
        torch.testing.assert_close(torch.tensor(stage["values"]["probabilities"]), probabilities, rtol=0, atol=1e-5)
        assert stage["values"]["prediction"] == int(probabilities.argmax())
    assert [s["values"]["prediction"] for s in body["stages"]] == [2, 2, 2, 3, 3]  # learnt, then misread


# ---- the lab


def digit(split, i: int) -> list[list[int]]:
    return split[0][i].tolist()


def test_runs_answer_the_case_shape_with_probabilities_and_saliency(module_app, split):
    response = module_app.test_client().post("/api/models/lenet/runs",
                                      json={"image": digit(split, 345), "label": 2, "compare_with": "misread"})
    assert response.status_code == 200
    body = response.get_json()
    case = body["case"]
    items = {i["key"]: i for group in ("matrices", "vectors", "metrics") for i in case[group]}
    probs = items["probabilities"]["values"]
    assert len(probs) == 10 and sum(probs) == pytest.approx(1, abs=1e-6)
    assert items["prediction"]["value"] == 3 and max(probs) == probs[3]
    assert len(items["saliency"]["values"]) == 8 and all(len(r) == 8 for r in items["saliency"]["values"])
    assert items["loss"]["value"] == pytest.approx(-torch.tensor(probs[2]).log().item(), abs=1e-5)
    assert body["record_check"]["status"] == "passed"


def test_saliency_is_input_times_the_gradient_by_finite_differences(model, split):
    image = digit(split, 14)
    case = recipe.run_case(model, image)
    saliency = torch.tensor(next(m for m in case["matrices"] if m["key"] == "saliency")["values"], dtype=torch.float64)
    predicted = next(m for m in case["metrics"] if m["key"] == "prediction")["value"]
    exact = lenet.build_model().double()
    x = digits.pixels(image).double()
    step = 1e-6
    by_hand = torch.zeros(8, 8, dtype=torch.float64)
    with torch.no_grad():
        for r in range(8):
            for c in range(8):
                up, down = x.clone(), x.clone()
                up[0, 0, r, c] += step
                down[0, 0, r, c] -= step
                slope = (exact(up)[0, predicted] - exact(down)[0, predicted]) / (2 * step)
                by_hand[r, c] = x[0, 0, r, c] * slope
    torch.testing.assert_close(saliency, by_hand, rtol=1e-3, atol=1e-4)
    blank = [[r, c] for r in range(8) for c in range(8) if image[r][c] == 0]
    assert all(saliency[r, c] == 0 for r, c in blank)


def test_the_trace_is_exact_at_the_last_layer_and_defaults_to_the_digit_read(module_app, split):
    client = module_app.test_client()
    body = client.post("/api/models/lenet/trace", json={"image": digit(split, 345)}).get_json()
    assert body["target"] == body["predicted"] == 3
    head = body["stages"][0]
    assert head["check"] == pytest.approx(head["logit"], abs=1e-5)
    assert [s["id"] for s in body["stages"]] == ["logit", "act", "stage2.pool", "stage2.act", "stage1.pool",
                                                 "stage1.act", "input"]
    maps = {s["id"]: s for s in body["stages"][1:]}
    assert maps["stage2.pool"]["shape"] == [16, 2, 2] and len(maps["stage2.pool"]["channel_totals"]) == 16
    # Average pooling is linear, so it passes the first-order shares through unchanged.
    assert maps["stage2.pool"]["total"] == pytest.approx(maps["stage2.act"]["total"], rel=1e-5)
    other = client.post("/api/models/lenet/trace", json={"image": digit(split, 345), "target": 2}).get_json()
    assert other["target"] == 2 and other["stages"][0]["logit"] < head["logit"]


ROW = [0] * 8


@pytest.mark.parametrize(("body", "message"), [
    ({}, "image: is required"),
    ({"image": "7"}, "image: must be a list of 8 rows"),
    ({"image": [ROW] * 7}, "image: must hold exactly 8 rows, not 7"),
    ({"image": [ROW] * 7 + [[0] * 9]}, "image[7]: must hold exactly 8 values, not 9"),
    ({"image": [ROW] * 7 + [5]}, "image[7]: must be a list of 8 integers"),
    ({"image": [ROW] * 3 + [[0, 0, 17, 0, 0, 0, 0, 0]] + [ROW] * 4}, "image[3][2]: 17 is out of range 0..16"),
    ({"image": [ROW] * 3 + [[0, -1, 0, 0, 0, 0, 0, 0]] + [ROW] * 4}, "image[3][1]: -1 is out of range 0..16"),
    ({"image": [ROW] * 7 + [[0, 0, 0, 0, 0, 0, 0, 2.5]]}, "image[7][7]: must be an integer, not float"),
    ({"image": [ROW] * 7 + [[0, 0, 0, 0, 0, 0, 0, True]]}, "image[7][7]: must be an integer, not bool"),
    ({"image": [ROW] * 7 + [[0, 0, 0, 0, 0, 0, 0, None]]}, "image[7][7]: must be an integer, not NoneType"),
    ({"image": [ROW] * 8, "label": 10}, "label: 10 is out of range 0..9"),
    ({"image": [ROW] * 8, "pixels": []}, "pixels: unknown field"),
])
def test_bad_grids_get_a_400_naming_the_cell(module_app, body, message):
    for endpoint in ("runs", "trace"):
        if endpoint == "trace" and "label" in body:
            continue
        response = module_app.test_client().post(f"/api/models/lenet/{endpoint}", json=body)
        assert response.status_code == 400
        assert response.get_json()["error"]["message"].startswith(message)


def test_a_blank_drawing_is_read_without_error(module_app):
    body = module_app.test_client().post("/api/models/lenet/runs", json={"image": [ROW] * 8}).get_json()
    saliency = next(m for m in body["case"]["matrices"] if m["key"] == "saliency")["values"]
    assert all(v == 0 for row in saliency for v in row)  # nothing drawn, nothing to rest on
    assert "loss" not in {m["key"] for m in body["case"]["metrics"]}
