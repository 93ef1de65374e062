"""The Mamba recipe against an independent computation (the whole model written again in NumPy, the scan as a
loop over the tokens), the task's answers, its checks (each one broken), the retraining command and its lab (its
verification: tests/test_recordings.py)."""

import json

import numpy as np
import pytest
import torch

from app.services.config import PROJECT_ROOT

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "mamba"
MANIFEST = PROJECT_ROOT / "manifests" / "mamba" / "manifest.json"
task = recipe_module(RECIPE, "task")
mamba = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return mamba.build_model()


def numpy_mamba(state: dict, tokens: list[int], config) -> np.ndarray:
    """The Mamba forward pass written again in NumPy in double precision, each block's scan a loop over the tokens:
    the logits (T, vocab)."""
    w = {k: v.double().numpy() for k, v in state.items()}
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    rms = lambda v, g: v / np.sqrt((v ** 2).mean(-1, keepdims=True) + 1e-5) * g  # noqa: E731
    x = w["embed.weight"][tokens]  # (T, d_model)
    steps, width, n = len(tokens), config.d_conv, config.d_state
    for layer in range(config.layers):
        p = lambda name: w[f"layers.{layer}.{name}"]  # noqa: B023, E731
        u = rms(x, p("norm.weight")) @ p("mixer.in_proj.weight").T
        inner, gate = u[:, :config.d_inner], u[:, config.d_inner:]
        kernel = p("mixer.conv1d.weight")[:, 0, :]  # (d_inner, width): tap width-1 is the current token
        conv = np.stack([sum(kernel[:, width - 1 - j] * inner[t - j] for j in range(width) if t - j >= 0)
                         for t in range(steps)]) + p("mixer.conv1d.bias")
        xs = silu(conv)
        projected = xs @ p("mixer.x_proj.weight").T
        dt, B, C = projected[:, :config.dt_rank], projected[:, config.dt_rank:config.dt_rank + n], projected[:, -n:]
        delta = np.log1p(np.exp(dt @ p("mixer.dt_proj.weight").T + p("mixer.dt_proj.bias")))  # softplus
        A = -np.exp(p("mixer.A_log"))  # (d_inner, N)
        h, ys = np.zeros_like(A), []
        for t in range(steps):
            h = np.exp(delta[t][:, None] * A) * h + (delta[t] * xs[t])[:, None] * B[t][None, :]
            ys.append(h @ C[t] + p("mixer.D") * xs[t])
        y = np.stack(ys) * silu(gate)
        x = x + y @ p("mixer.out_proj.weight").T
    return rms(x, w["norm_f.weight"]) @ w["head.weight"].T


@pytest.mark.parametrize("tokens", [task.example(), recipe.MOVED, recipe.LONGER, [9], [3, 0, 9, 9]])
def test_the_model_equals_numpy_written_token_by_token(model, tokens):
    with torch.no_grad():
        ours = model(torch.tensor([tokens]))[0].double().numpy()
    reference = numpy_mamba(model.state_dict(), tokens, model.config)
    assert np.abs(ours - reference).max() <= 1e-4 * np.abs(reference).max()


def test_the_parallel_scan_equals_the_recurrence_on_random_inputs():
    generator = torch.Generator().manual_seed(0)
    batch, steps, channels, n = 3, 37, 5, 4  # 37: not a power of two, so the last round is partial
    x = torch.randn(batch, steps, channels, generator=generator)
    delta = torch.rand(batch, steps, channels, generator=generator)
    A = -torch.rand(channels, n, generator=generator) * 4
    B, C = (torch.randn(batch, steps, n, generator=generator) for _ in range(2))
    D = torch.randn(channels, generator=generator)
    y = mamba.SelectiveScan()(x, delta, A, B, C, D)
    for k in range(batch):
        _, outputs = recipe.sequential(x[k], delta[k], A, B[k], C[k], D)
        assert (y[k].double() - outputs).abs().max() < 1e-5


@pytest.mark.parametrize(("typed", "at", "right"), [
    (".3..7...1....5..????", [16, 17, 18, 19], [3, 7, 1, 5]),
    ("12??", [2, 3], [1, 2]),
    ("12?", [2], [1]),  # fewer markers than digits: the first ones
    ("1???", [1, 2, 3], None),  # more markers than digits
    ("1?2?", [1, 3], None),  # a digit after a marker
    ("..?", [2], None),
])
def test_the_task_s_right_answers(typed, at, right):
    assert task.answers(task.tokens_of(typed)) == (at, right)


def test_a_training_batch_is_the_task():
    tokens, targets = task.batch(50, torch.Generator().manual_seed(1))
    for row, want in zip(tokens.tolist(), targets.tolist(), strict=True):
        at, right = task.answers(row)
        assert at == list(range(task.SPAN, task.STEPS)) and [want[k] for k in at] == right
        assert all(w == -100 for k, w in enumerate(want) if k not in at)


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == [recipe.CHECK_SCAN, recipe.CHECK_MIXING, recipe.CHECK_HELD,
                                                     recipe.CHECK_LSTM]
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_the_scan_checks_catch_a_scan_that_skips_a_round(monkeypatch, model):
    def one_round_short(self, x, delta, A, B):
        a = torch.exp(delta[..., None] * A)
        b = delta[..., None] * B[:, :, None, :] * x[..., None]
        earlier = torch.nn.functional.pad(b[:, :-1], (0, 0, 0, 0, 1, 0))
        return a * earlier + b  # only the previous token: a state that forgets after one step

    monkeypatch.setattr(mamba.SelectiveScan, "states", one_round_short)
    assert not recipe.check_scan(model)["passed"]
    assert not recipe.check_mixing(model)["passed"]


def test_the_held_out_checks_catch_other_weights(model):
    broken = mamba.build_model()
    with torch.no_grad():
        broken.head.weight[3] += 1.0  # every answer leans to "3"
    assert not recipe.check_held(broken)["passed"]
    lstm = mamba.build_lstm()
    with torch.no_grad():
        lstm.head.bias[5] += 5.0
    assert not recipe.check_held(lstm, mamba.LSTM_WEIGHTS)["passed"]


def test_the_recorded_cases():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    items = {c: {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in cases[c][part]} for c in cases}
    example = items["example"]
    assert example["expected"]["values"] == [3, 7, 1, 5] == example["predicted"]["values"]
    assert len(example["mixing_2"]["values"]) == len(example["mixing_2"]["columns"]) == 20
    assert np.triu(np.array(example["mixing_2"]["values"]), 1).max() == 0  # causal: nothing from later tokens
    assert items["moved"]["predicted"]["values"] == [3, 7, 1, 5]
    split = items["test-split"]
    stored = {path: recipe.stored.read(path)[1] for path in (mamba.WEIGHTS, mamba.LSTM_WEIGHTS)}
    assert split["test_right"]["value"] == int(stored[mamba.WEIGHTS]["test_right"])
    assert split["baseline_test_right"]["value"] == int(stored[mamba.LSTM_WEIGHTS]["test_right"])
    assert len(split["mamba_training_loss"]["values"]) == train.EPOCHS


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, capsys, monkeypatch):
    """`train.py --check` on the stored weights standing in for a retraining (a minute: README)."""
    from recipekit import training

    lstm = mamba.build_lstm()
    fitted = [training.Fitted(net, [0.0] * train.EPOCHS, [{"accuracy": 0.0}] * train.EPOCHS) for net in (model, lstm)]
    monkeypatch.setattr(train, "train", lambda: tuple(fitted))
    monkeypatch.setattr(training, "trained_here", lambda made: True)  # as on the machine that trained them
    assert train.main(["--check"]) == 0
    changed = mamba.build_lstm()
    with torch.no_grad():
        changed.head.bias[0] += 0.01
    monkeypatch.setattr(train, "train", lambda: (fitted[0], training.Fitted(changed, [0.0], [{"accuracy": 0.0}])))
    assert train.main(["--check"]) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_typed_sequence_is_read_by_both_models(module_client):
    answer = module_client.post("/api/models/mamba/runs", json={"tokens": task.tokens_of("..6...2..??")})
    assert answer.status_code == 200, answer.get_json()
    case = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in answer.get_json()["case"][part]}
    assert case["answered_at"]["values"] == [9, 10] and case["expected"]["values"] == [6, 2]
    assert len(case["baseline_predicted"]["values"]) == 2 and len(case["delta_1"]["values"]) == 11
    assert answer.get_json()["axes"]["mixing_1"]["columns"][2]["name"] == "3 6"


@pytest.mark.parametrize(("body", "message"), [
    ({"tokens": [1, 2, 3]}, "tokens: put at least one marker (?) where an answer is wanted"),
    ({"tokens": [10]}, "tokens[0]: 10 is out of range"),
    ({"tokens": [9] * 49}, "tokens: "),
    ({"tokens": []}, "tokens: "),
])
def test_bad_requests_name_the_field(module_client, body, message):
    answer = module_client.post("/api/models/mamba/runs", json=body)
    assert answer.status_code == 400 and answer.get_json()["error"]["message"].startswith(message)


def test_a_change_that_blows_the_scan_up_is_the_request_s_400_naming_the_node(module_client):
    """Δ made negative turns each step's decay exp(Δ A) into growth: the answer overflows to infinity."""
    answer = module_client.post("/api/models/mamba/interventions", json={
        "case": "example", "interventions": [{"node": "layers.0.mixer.softplus", "action": "scale", "factor": -1}]})
    assert answer.status_code == 400
    assert answer.get_json()["error"]["message"].startswith(
        "interventions: the changes to layers.0.mixer.softplus made the answer NaN or infinite")


def test_what_if_changes_the_mamba_alone_and_not_the_lstm_beside_it(module_client):
    """The LSTM is no part of the recorded graph: a change to `embed` or `head` (names both models use) reaches the
    Mamba's module alone."""
    answer = module_client.post("/api/models/mamba/interventions", json={
        "case": "example", "interventions": [{"node": "embed", "action": "zero"}]})
    assert answer.status_code == 200, answer.get_json()
    items = answer.get_json()["items"]
    assert items["baseline_predicted"]["after"] == items["baseline_predicted"]["before"] == [3, 7, 1, 5]
    assert items["predicted"]["after"] != [3, 7, 1, 5]
    assert set(answer.get_json()["effects"]) <= {layer["id"] for layer in module_client.get(
        "/api/models/mamba").get_json()["layers"]}
