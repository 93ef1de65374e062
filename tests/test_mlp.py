"""The back-propagation network on XOR: equal to an independent computation, its checks (each one broken), its
retraining, its lab (any point of the input plane: the answer there, the decision regions, the hidden units' lines),
and, with its lab taken away, everything a model without a lab still offers: What if? on its recorded cases, named
rows and columns, small multiples each on its own scale, a curve, inputs made by the recipe."""

import csv
import io
import json
import re

import numpy as np
import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training
from recipekit import weights as stored

from .conftest import ModelTree, TestConfig, recipe_module

MLP_RECIPE = PROJECT_ROOT / "recipes" / "mlp"
mlp = recipe_module(MLP_RECIPE, "model")
recipe = recipe_module(MLP_RECIPE, "run")
lab = recipe_module(MLP_RECIPE, "lab")
train = recipe_module(MLP_RECIPE, "train")
URL = "/api/models/mlp/interventions"


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def by_hand(state: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The network from its stored numbers with numpy, in double precision: hidden units (B, 2), answers (B,)."""
    w = {k: v.double().numpy() for k, v in state.items()}
    hidden = sigmoid(x @ w["hidden.weight"].T + w["hidden.bias"])
    return hidden, sigmoid(hidden @ w["output.weight"].T + w["output.bias"])[:, 0]


def test_the_recorded_cases_equal_numpy_on_the_stored_weights():
    state, _ = stored.read(mlp.WEIGHTS)
    cases = recipe.replay()["cases"]
    hidden, answer = by_hand(state, np.array(mlp.INPUTS))
    values = {m["key"]: m["values"] for m in cases["xor"]["matrices"] + cases["xor"]["vectors"]}
    np.testing.assert_allclose(values["hidden"], hidden, atol=1e-6)
    np.testing.assert_allclose(values["answer"], answer, atol=1e-6)
    points, _ = recipe.plane()
    plane_hidden, plane_answer = by_hand(state, points.double().numpy())
    maps = {m["key"]: np.array(m["values"]) for m in cases["plane"]["matrices"]}
    np.testing.assert_allclose(maps["plane_c0"].ravel(), plane_hidden[:, 0], atol=1e-6)
    np.testing.assert_allclose(maps["plane_c2"].ravel(), plane_answer, atol=1e-6)
    assert maps["plane_c2"][0, 5] > 0.5 and maps["plane_c2"][15, 5] < 0.5  # (0, 1) on, (0, 0) off: rows from x2 = 1.5


def test_checks_pass_and_each_catches_what_it_checks():
    model = mlp.build_model()
    assert all(check(model)["passed"] for check in recipe.CHECKS.values())
    flat = mlp.build_model()
    with torch.no_grad():
        flat.output.weight.zero_()  # every answer the same: XOR fails, and so does the stored error
    assert not recipe.check_xor(flat)["passed"] and not recipe.check_error(flat)["passed"]
    assert not recipe.check_linear(flat)["passed"]  # no better than the best line


def test_the_gradient_check_catches_a_gradient_that_is_not_the_errors():
    class Detached(mlp.MLP):  # the output's input detached: back-propagation no longer reaches the hidden layer
        def forward(self, x):
            return self.decide(self.output(self.squash(self.hidden(x)).detach()))

    broken = Detached(mlp.MLPConfig())
    broken.load_state_dict(mlp.build_model().state_dict())
    assert not recipe.check_gradients(broken)["passed"]


def test_training_reproduces_the_stored_weights_and_its_check_sees_a_change(train_check, capsys):
    fitted = train.train()
    assert stored.largest_difference(stored.state_of(fitted.model), stored.read(mlp.WEIGHTS)[0]) <= \
        train.RETRAIN_TOLERANCE
    assert fitted.losses == pytest.approx(json.loads(stored.read(mlp.WEIGHTS)[1]["loss_per_epoch"]), rel=1e-5)
    changed = mlp.build_model()
    with torch.no_grad():
        changed.hidden.bias[0] += 0.01
    assert train_check(train, training.Fitted(changed, [])) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


def test_the_graph_is_traced_on_the_inputs_the_recipe_makes():
    manifest = json.loads((PROJECT_ROOT / "manifests" / "mlp" / "manifest.json").read_text())
    assert manifest["provenance"]["execution"]["inputs"]["args"] == [
        {"shape": [4, 2], "dtype": "float32", "madeBy": "example_inputs()"}]
    ids = {layer["id"] for layer in manifest["layers"]}
    assert {"input:x", "hidden", "squash", "output", "decide", "output:model"} <= ids  # a module named output


@pytest.fixture(scope="module")
def labless_client(tmp_path_factory, module_apps):
    """The MLP as a model without a lab: its recipe with no [lab] declared and no lab.py."""
    tree = ModelTree(tmp_path_factory.mktemp("labless"))
    _, folder = tree.copy("mlp")
    toml = (folder / "recipe.toml").read_text()
    (folder / "recipe.toml").write_text(re.sub(r"\n\[lab\].*?(?=\n\[display\])", "\n", toml, flags=re.S))
    (folder / "lab.py").unlink()
    return module_apps(type("Labless", (TestConfig,), tree.config())).test_client()


def test_the_lab_answers_any_point_of_the_plane_as_numpy_does(module_client):
    """A point's hidden units and answer equal the network computed by hand; the regions are the answer over the
    plane and the lines the hidden layer's own weights; the outcome says the answer, and whether it is right where
    the point is one of XOR's cases."""
    state, _ = stored.read(mlp.WEIGHTS)
    for x1, x2 in ((1, 0), (0.3, 0.8), (-0.5, 1.5)):
        answer = module_client.post("/api/models/mlp/runs", json={"x1": x1, "x2": x2})
        assert answer.status_code == 200, answer.get_json()
        body = answer.get_json()
        items = {i["key"]: i for group in ("vectors", "matrices", "metrics") for i in body["case"][group]}
        hidden, out = by_hand(state, np.array([[x1, x2]], dtype=np.float64))
        assert items["hidden"]["values"] == pytest.approx(hidden[0].tolist(), abs=1e-6)
        assert items["answer"]["value"] == pytest.approx(out[0], abs=1e-6)
        grid = np.array([[a, b] for b in np.linspace(1.5, -0.5, 41) for a in np.linspace(-0.5, 1.5, 41)])
        assert np.array(items["regions"]["values"]).ravel() == pytest.approx(by_hand(state, grid)[1], abs=1e-5)
        weights = np.concatenate([state["hidden.weight"].numpy(), state["hidden.bias"].numpy()[:, None]], 1)
        assert np.array(items["lines"]["values"]) == pytest.approx(weights)
        read = int(out[0] > 0.5)
        assert body["outcome"].startswith(f"At ({x1:g}, {x2:g}) the network answers {out[0]:.2f}, so {read}")
        corner = (x1, x2) in mlp.INPUTS
        assert ("right, the training data says 1 there" in body["outcome"]) == corner
        assert ("No training case is there" in body["outcome"]) == (not corner)


def test_the_lab_replays_its_recorded_point_and_refuses_a_point_off_the_plane(module_client):
    replayed = module_client.post("/api/models/mlp/runs", json={"x1": 1, "x2": 0, "compare_with": "point"})
    assert replayed.get_json()["record_check"]["status"] == "passed"
    for body, field in (({"x1": 1.6, "x2": 0}, "x1"), ({"x1": 0}, "x2"), ({"x1": 0, "x2": "a"}, "x2")):
        refused = module_client.post("/api/models/mlp/runs", json=body)
        assert refused.status_code == 400 and refused.get_json()["error"]["message"].startswith(f"{field}:")
    assert lab.main(["0.3", "0.8"]) == 0  # python lab.py 0.3 0.8


def test_what_if_changes_a_recorded_case_of_a_model_without_a_lab(labless_client):
    module_client = labless_client
    answer = module_client.post(URL, json={"case": "xor", "interventions": [{"node": "squash", "action": "zero"}]})
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert body["endpoint"] is None and body["request"] == {"case": "xor"}
    answers = body["items"]["answer"]
    assert answers["after"][0] == pytest.approx(answers["after"][3]) and answers["after"][0] > 0.5  # all alike now
    assert body["effects"]["hidden"] == 0 and body["effects"]["squash"] == 1.0
    patched = module_client.post(URL, json={"case": "xor", "interventions": [
        {"node": "hidden", "action": "patch", "from_case": "xor"}]}).get_json()
    assert max(patched["effects"].values()) == 0  # patching a case from itself changes nothing
    for body, field in (({"request": {"x": 1}, "interventions": []}, "request"),
                        ({"case": "xor", "endpoint": "runs", "interventions": []}, "endpoint")):
        refused = module_client.post(URL, json=body)
        assert refused.status_code == 400
        assert refused.get_json()["error"]["message"].startswith(f"{field}: model 'mlp' has no lab")
    assert module_client.post("/api/models/mlp/runs", json={}).status_code == 404


def test_a_page_without_a_lab_leads_with_its_recorded_cases(labless_client):
    page = labless_client.get("/models/mlp").get_data(as_text=True)
    nav = re.search(r'<nav class="section-nav".*?</nav>', page, re.S).group(0)
    assert re.findall(r'href="#([a-z-]+)"', nav) == ["example", "architecture", "whatif", "verification", "retraining",
                                                     "about"]
    assert 'id="lab"' not in page


def test_the_page_names_rows_and_columns_draws_a_curve_and_maps_each_on_its_own_scale(labless_client):
    module_client = labless_client
    xor = module_client.get("/models/mlp?case=xor").get_data(as_text=True)
    assert ">0: 0 0</th>" in xor and ">1: h2</th>" in xor  # the rows by input, the columns by unit
    assert 'data-chart="whatif"' not in xor and 'value="case" checked' in xor and 'value="lab"' not in xor
    plane = module_client.get("/models/mlp?case=plane").get_data(as_text=True)
    assert 'data-chart="multiples"' in plane and 'data-scale="own"' in plane and "each on its own scale" in plane
    curve = module_client.get("/models/mlp?case=training").get_data(as_text=True)
    assert 'data-chart="curve"' in curve and "&#34;log&#34;: true" in curve
    assert "Mean squared error by step" in curve
    rows = list(csv.DictReader(io.StringIO(module_client.get("/models/mlp/cases/xor.csv").get_data(as_text=True))))
    hidden = [r for r in rows if r["key"] == "hidden"]
    assert (hidden[1]["row_name"], hidden[1]["column_name"]) == ("0 0", "h2")
    assert [r["column_name"] for r in rows if r["key"] == "answer"] == ["0 0", "0 1", "1 0", "1 1"]
