"""The LSTM recipe: equal to torch.nn.LSTM, its checks (each one broken), training and its lab (its verification:
tests/test_recordings.py)."""

import json

import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training
from recipekit import weights as stored

from .conftest import kept_stages, largest_stage_difference, recipe_module

LSTM_RECIPE = PROJECT_ROOT / "recipes" / "lstm"
LSTM_MANIFEST = PROJECT_ROOT / "manifests" / "lstm" / "manifest.json"
lstm = recipe_module(LSTM_RECIPE, "model")
recipe = recipe_module(LSTM_RECIPE, "run")
train = recipe_module(LSTM_RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return lstm.build_model()


def torch_lstm_states(state: dict, tokens: torch.Tensor) -> torch.Tensor:
    """Every step's hidden state from the stored tensors alone: an embedding, then torch.nn.LSTM (its gates
    stacked i, f, g, o)."""
    gates = ("input_gate", "forget_gate", "candidate", "output_gate")
    hidden = state["cell.input_gate.U.weight"].shape[0]
    reference = torch.nn.LSTM(state["embed.weight"].shape[1], hidden, batch_first=True)
    with torch.no_grad():
        reference.weight_ih_l0.copy_(torch.cat([state[f"cell.{g}.W.weight"] for g in gates]))
        reference.weight_hh_l0.copy_(torch.cat([state[f"cell.{g}.U.weight"] for g in gates]))
        reference.bias_ih_l0.copy_(torch.cat([state[f"cell.{g}.W.bias"] for g in gates]))
        reference.bias_hh_l0.zero_()
        out, _ = reference(torch.nn.functional.embedding(tokens, state["embed.weight"]))
    return out  # (B, T, hidden)


# Float32 rounding differs between the two (one fused matrix product against four), and the cell state carries
# each step's difference on to the next: over 20 steps it stays under 1e-5, over 40 under 1e-4.
@pytest.mark.parametrize("lengths, tolerance", [(train.LENGTHS, 1e-5), ((21, 40), 1e-4)], ids=["trained", "longer"])
def test_the_cell_written_gate_by_gate_equals_torch_nn_lstm(model, lengths, tolerance):
    """Every hidden state of every step, and so the depths read (the head is one linear layer on them)."""
    state, _ = stored.read(lstm.WEIGHTS)
    tokens, _ = train.batch_of(train.bracket_strings(200, 11, lengths))
    with torch.no_grad():
        ours = recipe.hidden_states(model, tokens)
        logits = model(tokens)
    theirs = torch_lstm_states(state, tokens)
    worst = (ours - theirs).abs().max().item()
    assert worst <= tolerance, worst
    reread = theirs @ state["head.weight"].T + state["head.bias"]
    assert torch.equal(logits.argmax(-1), reread.argmax(-1))


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_torch_and_recurrence_checks_catch_a_cell_that_forgets_nothing(monkeypatch):
    def forward(self, x, h, c):  # c_t = c_{t-1} + i_t * g_t: the 1997 cell, without Gers's forget gate
        i, g, o = self.input_gate(x, h), self.candidate(x, h), self.output_gate(x, h)
        c = c + i * g
        return o * torch.tanh(c), c

    monkeypatch.setattr(lstm.LSTMCell, "forward", forward)
    broken = lstm.build_model()
    assert not recipe.check_torch(broken)["passed"]
    assert not recipe.check_recurrence(broken)["passed"]


def test_range_check_catches_a_gate_that_is_not_squashed():
    broken = lstm.build_model()
    broken.cell.forget_gate.act = torch.nn.Identity()
    result = recipe.check_ranges(broken)
    assert not result["passed"] and result["detail"]["forget_gate"]["max"] > 1


def test_accuracy_check_catches_other_weights():
    broken = lstm.build_model()
    with torch.no_grad():
        broken.head.bias[3] += 5.0  # depth 3 everywhere it was nearly as likely
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] < result["detail"]["at_training"]


def test_the_recorded_strings_hold_a_wholly_right_and_a_drifting_one():
    cases = {c["id"]: c for c in json.loads(LSTM_MANIFEST.read_text())["experiment"]["cases"]}
    metrics = {case_id: {m["key"]: m["value"] for m in c["metrics"]} for case_id, c in cases.items()}
    assert metrics["nested"]["steps_right"] == metrics["nested"]["steps"] == 8
    assert metrics["longer"]["steps"] == 31 and metrics["longer"]["steps_right"] < 31
    assert metrics["test-split"]["test_string_accuracy"] == 1.0
    assert metrics["test-split"]["longer-31-40_string_accuracy"] < 1.0
    curve = next(v["values"] for v in cases["test-split"]["vectors"] if v["key"] == "training_loss")
    assert len(curve) == train.EPOCHS and curve[-1] < curve[0] / 10


# ---- training


# Retraining all 15 epochs takes 20 s (`train.py --check` does, README): the test retrains the first epochs,
# which must pass exactly through the stages stored on the way.
RETRAINED_EPOCHS = 4


def test_training_from_the_seed_passes_through_the_stored_stages(monkeypatch):
    monkeypatch.setattr(train, "EPOCHS", RETRAINED_EPOCHS)
    fitted = train.train()
    snapshots, curve = fitted.snapshots, fitted.losses
    kept = kept_stages(lstm.SNAPSHOTS)
    assert sorted(snapshots) == [e for e in train.SNAPSHOT_EPOCHS if e < RETRAINED_EPOCHS] == [0, 1, 3]
    worst, where = largest_stage_difference(snapshots, kept)
    assert worst <= train.RETRAIN_TOLERANCE, where
    _, metadata = stored.read(lstm.WEIGHTS)
    assert curve == pytest.approx(json.loads(metadata["loss_per_epoch"])[:RETRAINED_EPOCHS], rel=1e-4)


def test_train_check_exits_1_naming_a_stored_stage_that_differs(tmp_path, monkeypatch, capsys, train_check):
    """`train.py --check` with the stored weights and stages standing in for its retraining: 0 for the stored
    files, 1 with one kept stage changed by 0.01, which it names as the largest difference."""
    from safetensors.torch import save_file

    retrained = training.Fitted(lstm.build_model(), [], snapshots=kept_stages(lstm.SNAPSHOTS))
    assert train_check(train, retrained) == 0
    state, metadata = stored.read(lstm.SNAPSHOTS)
    state["epoch-3/head.bias"] = state["epoch-3/head.bias"] + 0.01
    save_file(state, str(tmp_path / "snapshots.safetensors"), metadata=metadata)
    monkeypatch.setattr(train, "SNAPSHOTS", tmp_path / "snapshots.safetensors")
    assert train_check(train, retrained) == 1
    assert "largest weight difference 1.00e-02 (snapshots.safetensors: epoch-3/head.bias)" in capsys.readouterr().out
    del state["epoch-3/head.bias"]  # another set of tensors: the missing one is named
    save_file(state, str(tmp_path / "snapshots.safetensors"), metadata=metadata)
    assert train_check(train, retrained) == 1
    assert "largest weight difference not in the stored file (snapshots.safetensors: epoch-3/head.bias)" in \
        capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_live_run_answers_every_state_at_every_step_with_the_tokens_on_the_rows(module_app):
    answer = module_app.test_client().post("/api/models/lstm/runs", json={"tokens": [0, 0, 1, 0, 1, 1]}).get_json()
    case = answer["case"]
    matrices = {m["key"]: m["values"] for m in case["matrices"]}
    assert set(matrices) == {"input_gate", "forget_gate", "candidate", "output_gate", "cell", "hidden",
                             "probabilities"}
    assert all(len(values) == 6 for values in matrices.values())
    vectors = {v["key"]: v["values"] for v in case["vectors"]}
    assert vectors["expected"] == [1, 2, 1, 2, 1, 0] and vectors["predicted"] == vectors["expected"]
    assert [r["name"] for r in answer["axes"]["cell"]["rows"]] == ["(", "(", ")", "(", ")", ")"]
    assert "columns" not in answer["axes"]["cell"]  # the units keep their numbers


def test_a_recorded_string_run_live_reproduces_its_recording(module_app):
    answer = module_app.test_client().post("/api/models/lstm/runs", json={"tokens": recipe.tokens_of("(()(()))"),
                                                                   "compare_with": "nested"}).get_json()
    assert answer["record_check"]["status"] == "passed"


def test_a_string_with_no_true_depth_is_read_without_one(module_app):
    """Closing a bracket never opened, or nesting deeper than 8: the network reads it all the same, and the
    case holds no true depth, no count of right answers and no loss."""
    for tokens in ([1, 0], [0] * 9):
        case = module_app.test_client().post("/api/models/lstm/runs", json={"tokens": tokens}).get_json()["case"]
        keys = {i["key"] for group in ("vectors", "metrics") for i in case[group]}
        assert keys == {"tokens", "predicted", "steps"}, tokens


@pytest.mark.parametrize("tokens, message", [([0, 2], "tokens[1]"), ([0] * 49, "tokens"), ([], "tokens")])
def test_tokens_outside_the_declaration_are_a_400_naming_the_field(module_app, tokens, message):
    response = module_app.test_client().post("/api/models/lstm/runs", json={"tokens": tokens})
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(message), response.get_json()
