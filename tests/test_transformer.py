"""The Transformer recipe: equal to torch.nn.Transformer, its checks (each one broken), the retraining
command and its lab (its verification: tests/test_recordings.py)."""

import json
import math

import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training
from recipekit import weights as stored

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "transformer"
MANIFEST = PROJECT_ROOT / "manifests" / "transformer" / "manifest.json"
transformer = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return transformer.build_model()


def torch_transformer_logits(state: dict, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Logits from the stored tensors alone: torch.nn.Transformer's layers (no final norms, as in post-LN),
    the shared embedding scaled by √d plus sinusoids, and the tied output projection."""
    embedding = state["embed.weight"]
    d_model = embedding.shape[1]
    d_ff = state["encoder.0.ffn.fc1.weight"].shape[0]
    layers = {side: 1 + max(int(k.split(".")[1]) for k in state if k.startswith(f"{side}.")) for side in
              ("encoder", "decoder")}
    reference = torch.nn.Transformer(d_model, 2, layers["encoder"], layers["decoder"], d_ff, dropout=0.0,
                                     batch_first=True)
    reference.encoder.norm = reference.decoder.norm = None
    theirs = {}
    for side, attentions in (("encoder", {"self_attn": "self_attn"}),
                             ("decoder", {"self_attn": "self_attn", "multihead_attn": "cross_attn"})):
        for i in range(layers[side]):
            ours = f"{side}.{i}"
            for their_name, our_name in attentions.items():
                part = f"{ours}.{our_name}"
                theirs[f"{side}.layers.{i}.{their_name}.in_proj_weight"] = torch.cat(
                    [state[f"{part}.{p}.weight"] for p in "qkv"])
                theirs[f"{side}.layers.{i}.{their_name}.in_proj_bias"] = torch.cat(
                    [state[f"{part}.{p}.bias"] for p in "qkv"])
                theirs[f"{side}.layers.{i}.{their_name}.out_proj.weight"] = state[f"{part}.out.weight"]
                theirs[f"{side}.layers.{i}.{their_name}.out_proj.bias"] = state[f"{part}.out.bias"]
            for end in ("weight", "bias"):
                theirs[f"{side}.layers.{i}.linear1.{end}"] = state[f"{ours}.ffn.fc1.{end}"]
                theirs[f"{side}.layers.{i}.linear2.{end}"] = state[f"{ours}.ffn.fc2.{end}"]
                for n in range(1, 4 if side == "decoder" else 3):
                    theirs[f"{side}.layers.{i}.norm{n}.{end}"] = state[f"{ours}.norm{n}.{end}"]
    reference.load_state_dict(theirs)
    reference.eval()
    positions = torch.arange(32, dtype=torch.float32)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    table = torch.stack([positions.sin(), positions.cos()], -1).flatten(1)  # sin on even, cos on odd features

    def embed(tokens):
        return torch.nn.functional.embedding(tokens, embedding) * math.sqrt(d_model) + table[:tokens.size(1)]

    mask = torch.nn.Transformer.generate_square_subsequent_mask(target.size(1))
    with torch.no_grad():
        return reference(embed(source), embed(target), tgt_mask=mask, tgt_is_causal=True) @ embedding.T


@pytest.mark.parametrize("lengths", [train.LENGTHS, recipe.LONGER], ids=["trained", "longer"])
def test_the_recipe_equals_torch_nn_transformer_built_from_the_stored_tensors(model, lengths):
    """Every logit of every step, teacher-forced, on held-out sources; so the same tokens are written."""
    state, _ = stored.read(transformer.WEIGHTS)
    for sources in train.by_length(train.digit_sequences(200, 11, lengths)):
        target = train.pair(sources)[0]
        with torch.no_grad():
            ours = model(sources, target)
        theirs = torch_transformer_logits(state, sources, target)
        assert (ours - theirs).abs().max().item() <= recipe.LOGITS
        assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_causal_and_torch_checks_catch_a_decoder_that_sees_later_steps():
    broken = transformer.build_model()
    for layer in broken.decoder:
        layer.self_attn.causal = False
    causal = recipe.check_causal(broken)
    assert not causal["passed"] and causal["detail"]["largest_weight_above_diagonal"] > 0
    assert not recipe.check_torch(broken)["passed"]


def test_torch_check_catches_attention_scaled_by_the_model_width(monkeypatch):
    """Scores divided by √d_model instead of √d_head: attention still normalises, but is not the paper's."""
    real_split = transformer.MultiHeadAttention.split
    monkeypatch.setattr(transformer.MultiHeadAttention, "split",
                        lambda self, x: real_split(self, x) * (2 ** -0.25))  # q·k shrinks by √2 = √(32/16)
    result = recipe.check_torch(transformer.build_model())
    assert not result["passed"] and result["detail"]["max_difference"] > recipe.LOGITS


def test_accuracy_check_catches_other_weights():
    broken = transformer.build_model()
    with torch.no_grad():
        broken.decoder[1].cross_attn.out.weight.mul_(0.5)
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] != result["detail"]["at_training"]


def test_the_recorded_sources_hold_exact_answers_and_one_past_the_trained_lengths():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    metrics = {case_id: {m["key"]: m["value"] for m in c["metrics"]} for case_id, c in cases.items()}
    assert metrics["short"]["exact"] == metrics["eight"]["exact"] == 1
    assert metrics["longer"]["exact"] == 0
    assert metrics["test-split"]["test_exact_match"] >= 0.95 and metrics["test-split"]["longer_exact_match"] < 0.5
    vectors = {v["key"]: v["values"] for v in cases["test-split"]["vectors"]}
    curve = vectors["training_loss"]
    assert len(curve) == train.EPOCHS and curve[-1] < curve[0] / 10
    assert len(vectors["exact_match_by_length"]) == recipe.LONGER[1] - train.LENGTHS[0] + 1


def test_the_trained_cross_attention_reads_the_source_backwards():
    """In each recorded case of the trained lengths, some last-layer head puts each step's largest weight
    on the source digit that step writes: the alignment a reader sees as an anti-diagonal."""
    for case in json.loads(MANIFEST.read_text())["experiment"]["cases"]:
        matrices = {m["key"]: m["values"] for m in case.get("matrices", [])}
        if case["id"] in ("short", "eight"):
            n = len(next(v["values"] for v in case["vectors"] if v["key"] == "source"))
            looked = [[max(range(n), key=row.__getitem__) for row in matrices[f"cross_attention_l1_h{h}"][:n]]
                      for h in range(2)]
            assert list(range(n - 1, -1, -1)) in looked, looked


# ---- the retraining command (training itself takes a minute: README and the closing figures)


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    curve = json.loads(stored.read(transformer.WEIGHTS)[1]["loss_per_epoch"])
    assert train_check(train, training.Fitted(model, curve)) == 0
    changed = transformer.build_model()
    with torch.no_grad():
        changed.decoder[0].norm2.bias[5] += 0.01
    assert train_check(train, training.Fitted(changed, curve)) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_a_live_run_decodes_the_source_with_named_axes(module_app):
    answer = module_app.test_client().post("/api/models/transformer/runs", json={"source": [9, 0, 2, 1, 0]}).get_json()
    vectors = {v["key"]: v["values"] for v in answer["case"]["vectors"]}
    eos = transformer.EOS
    assert vectors["output"] == [0, 1, 2, 0, 9, eos] == vectors["expected"]
    assert vectors["decoder_input"] == [transformer.BOS, 0, 1, 2, 0, 9]
    cross = answer["axes"]["cross_attention_l0_h1"]
    assert [r["name"] for r in cross["rows"]] == ["<s>", "0", "1", "2", "0", "9"]
    assert [c["name"] for c in cross["columns"]] == ["9", "0", "2", "1", "0"]
    assert [c["name"] for c in answer["axes"]["probabilities"]["columns"]][-2:] == ["<s>", "</s>"]
    assert [r["name"] for r in answer["axes"]["encoder_attention_l1_h0"]["columns"]] == ["9", "0", "2", "1", "0"]


def test_a_recorded_source_run_live_reproduces_its_recording(module_app):
    answer = module_app.test_client().post("/api/models/transformer/runs", json={"source": recipe.tokens_of("31415926"),
                                                                          "compare_with": "eight"}).get_json()
    assert answer["record_check"]["status"] == "passed"


@pytest.mark.parametrize("source, message", [([1, 10], "source[1]"), ([1] * 13, "source"), ([], "source")])
def test_a_source_outside_the_declaration_is_a_400_naming_the_field(module_app, source, message):
    response = module_app.test_client().post("/api/models/transformer/runs", json={"source": source})
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(message), response.get_json()
