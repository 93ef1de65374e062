"""The GPT recipe: against transformers' GPT2LMHeadModel, its checks, its training, its verification and its
lab."""

import json
import math

import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training
from recipekit import weights as stored

from .conftest import GPT_RECIPE, recipe_module

gpt = recipe_module(GPT_RECIPE, "model")
recipe = recipe_module(GPT_RECIPE, "run")
lab = recipe_module(GPT_RECIPE, "lab")
train = recipe_module(GPT_RECIPE, "train")
GPT_MANIFEST = PROJECT_ROOT / "manifests" / "gpt" / "manifest.json"


@pytest.fixture(scope="module")
def model():
    return gpt.build_model()


def hf_gpt2(model):
    """transformers' GPT2LMHeadModel with the recipe's weights (its Conv1D stores weights transposed)."""
    transformers = pytest.importorskip("transformers")
    c = model.config
    config = transformers.GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.n_embd,
                                     n_layer=c.n_layer, n_head=c.n_head, activation_function="gelu_new",
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     layer_norm_epsilon=c.layer_norm_epsilon)
    reference = transformers.GPT2LMHeadModel(config).eval()
    ours = model.state_dict()
    theirs = {}
    for name, value in ours.items():
        key = name if name.startswith("lm_head") else f"transformer.{name}"
        if any(name.endswith(f"{layer}.weight") for layer in ("c_attn", "c_proj", "c_fc")):
            value = value.T
        theirs[key] = value
    missing, unexpected = reference.load_state_dict(theirs, strict=False)
    assert not unexpected and all(".attn.bias" in m or "masked_bias" in m for m in missing), (missing, unexpected)
    return reference


def test_gpt_equals_transformers_gpt2(model):
    reference = hf_gpt2(model)
    generator = torch.Generator().manual_seed(0)
    for length in (1, 5, 8):
        ids = torch.randint(0, model.config.vocab_size, (3, length), generator=generator)
        with torch.no_grad():
            ours = model(ids)
            theirs = reference(ids).logits
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_untying_the_head_breaks_the_equality(model):
    reference = hf_gpt2(model)
    broken = gpt.build_model()
    noise = 0.05 * torch.randn(broken.lm_head.weight.shape, generator=torch.Generator().manual_seed(1))
    broken.lm_head.weight = torch.nn.Parameter(broken.lm_head.weight.detach().clone() + noise)
    ids = torch.tensor([[1, 3, 6, 9]])
    with torch.no_grad():
        assert (broken(ids) - reference(ids).logits).abs().max() > 1e-3


def test_checks_pass_on_the_recipe(model):
    for name, check in recipe.CHECKS.items():
        assert check(model)["passed"], name


def test_causal_check_catches_a_model_that_looks_right():
    class Unmasked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = gpt.build_model()

        def forward(self, idx, causal=True):
            return self.inner(idx, causal=False)

    assert not recipe.check_causal(Unmasked())["passed"]


def test_loss_check_catches_an_unshifted_loss(model):
    def unshifted(logits, idx):
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.flatten())

    assert not recipe.check_shifted_loss(model, loss_fn=unshifted)["passed"]


def test_tied_head_check_catches_untied_weights():
    broken = gpt.build_model()
    broken.lm_head.weight = torch.nn.Parameter(broken.wte.weight.detach().clone())
    assert not recipe.check_tied_head(broken)["passed"]


def test_shape_check_catches_a_wrong_shape():
    class Wider(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = gpt.build_model()

        def forward(self, idx, causal=True):
            return torch.cat([self.inner(idx, causal), self.inner(idx, causal)[..., :1]], -1)

    assert not recipe.check_shapes(Wider())["passed"]


def test_accuracy_check_catches_other_weights():
    broken = gpt.build_model()
    with torch.no_grad():
        broken.h[1].attn.c_proj.weight.mul_(0.5)
    result = recipe.check_accuracy(broken)
    assert not result["passed"] and result["detail"]["replayed"] < result["detail"]["at_training"]


def test_the_trained_model_sorts_the_recorded_and_the_held_out_problems():
    cases = {c["id"]: c for c in json.loads(GPT_MANIFEST.read_text())["experiment"]["cases"]}
    for case_id, text in recipe.PROBLEMS.items():
        ids = next(v["values"] for v in cases[case_id]["vectors"] if v["key"] == "input_ids")
        answer = sorted(recipe.encode(text))
        assert ids == [*recipe.encode(text), gpt.EQUALS, *answer[:-1]]  # the written answer so far is right
        probs = next(m["values"] for m in cases[case_id]["matrices"] if m["key"] == "next_token_probs")
        assert max(range(VOCAB), key=probs[-1].__getitem__) == answer[-1]  # and so is the digit it writes last
    metrics = {m["key"]: m["value"] for m in cases["test-split"]["metrics"]}
    assert metrics["test_exact_match"] >= 0.99 and metrics["test_size"] == train.HELD_OUT
    curve = next(v["values"] for v in cases["test-split"]["vectors"] if v["key"] == "training_loss")
    assert len(curve) == train.EPOCHS and curve[-1] < curve[0] / 100


def test_no_held_out_problem_is_trained_on():
    training, held_out = train.problems()
    assert len(training) + len(held_out) == 10 ** gpt.DIGITS
    assert not {tuple(p) for p in training.tolist()} & {tuple(p) for p in held_out.tolist()}


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys):
    """`train.py --check` on the stored weights standing in for a retraining (which takes 20 s: README)."""
    curve = json.loads(stored.read(gpt.WEIGHTS)[1]["loss_per_epoch"])
    assert train_check(train, training.Fitted(model, curve)) == 0
    changed = gpt.build_model()
    with torch.no_grad():
        changed.ln_f.bias[3] += 0.01
    assert train_check(train, training.Fitted(changed, curve)) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab


PROMPT = recipe.encode("3 1 4 1 = 1 1 3")  # the recorded case "pi": a problem and the answer so far
VOCAB = len(recipe.WORDS)


def test_runs_answer_the_case_shape_with_keys(module_client):
    response = module_client.post("/api/models/gpt/runs", json={"input_ids": PROMPT, "compare_with": "pi"})
    assert response.status_code == 200
    body = response.get_json()
    case = body["case"]
    probs = next(m for m in case["matrices"] if m["key"] == "next_token_probs")["values"]
    assert len(probs) == len(PROMPT) and all(abs(sum(row) - 1) < 1e-5 for row in probs)
    loss = next(m for m in case["metrics"] if m["key"] == "loss")["value"]
    by_hand = -sum(math.log(probs[i][PROMPT[i + 1]]) for i in range(len(PROMPT) - 1)) / (len(PROMPT) - 1)
    assert loss == pytest.approx(by_hand, abs=1e-5)
    for key in ("attention_b0_h0", "attention_b1_h1"):
        weights = next(m for m in case["matrices"] if m["key"] == key)["values"]
        assert all(weights[i][j] == 0 for i in range(len(PROMPT)) for j in range(i + 1, len(PROMPT)))
    assert body["record_check"]["status"] == "passed"


def test_greedy_generation_takes_the_argmax_and_sampling_follows_its_seed(module_client):
    greedy = module_client.post("/api/models/gpt/generations", json={"input_ids": PROMPT[:2], "steps": 3}).get_json()
    for step in greedy["steps"]:
        assert step["pick"] == max(range(VOCAB), key=step["probabilities"].__getitem__)
    body = {"input_ids": PROMPT[:2], "steps": 4, "strategy": "sample", "top_k": 3, "temperature": 2.0, "seed": 11}
    first = module_client.post("/api/models/gpt/generations", json=body).get_json()
    second = module_client.post("/api/models/gpt/generations", json=body).get_json()
    assert first["output_ids"] == second["output_ids"] and len(first["output_ids"]) == 6
    for step in first["steps"]:
        allowed = sorted(range(VOCAB), key=step["probabilities"].__getitem__, reverse=True)[:3]
        assert step["pick"] in allowed and sum(p > 0 for p in step["drawn"]) == 3


def test_greedy_generation_sorts_a_problem_in_the_four_steps_the_context_reads(module_client):
    """Five tokens and four new ones: the last new token is never read, so nine tokens fit a context of eight."""
    body = {"input_ids": recipe.encode("8 0 3 0 ="), "steps": 4}
    answer = module_client.post("/api/models/gpt/generations", json=body).get_json()
    assert answer["text"] == "8 0 3 0 = 0 0 3 8"
    too_many = module_client.post("/api/models/gpt/generations", json=body | {"steps": 5})
    assert too_many.get_json()["error"]["message"].startswith("steps: 5 new tokens do not fit")


def test_trace_feeds_each_stage_into_the_next_and_ends_where_the_run_does(module_client):
    run = module_client.post("/api/models/gpt/runs", json={"input_ids": PROMPT[:4]}).get_json()["case"]
    probs = next(m for m in run["matrices"] if m["key"] == "next_token_probs")["values"]
    prompt = ",".join(map(str, PROMPT[:4]))
    body = module_client.get(f"/api/models/gpt/trace?input_ids={prompt}&position=1").get_json()
    stages = {s["id"]: s for s in body["stages"]}
    assert stages["block0"]["heads"][0]["scores"][2:] == [None, None]  # masked, as valid JSON
    assert stages["block1"]["input"] == pytest.approx(stages["block0"]["values"], abs=1e-6)
    top = stages["logits"]["table"][0]
    assert top["probability"] == pytest.approx(max(probs[1]), abs=1e-6)
    assert stages["prediction"]["actual_next"] == PROMPT[2]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("runs", {"input_ids": [1]}, "input_ids: must hold at least 2 values"),
    ("runs", {"input_ids": [1, 11]}, "input_ids[1]: 11 is out of range 0..10"),
    ("runs", {"input_ids": list(range(9))}, "input_ids: must hold at most 8 values"),
    ("runs", {"input_ids": [1, 2], "mlm_positions": [1]}, "mlm_positions: unknown field"),
    ("generations", {"input_ids": PROMPT, "steps": 2}, "steps: 2 new tokens do not fit"),
    ("generations", {"input_ids": [1], "temperature": 0}, "temperature: 0 is out of range"),
    ("generations", {"input_ids": [1], "strategy": "beam"}, "strategy: must be one of greedy, sample"),
])
def test_bad_lab_requests_name_the_field(module_client, path, body, field):
    response = module_client.post(f"/api/models/gpt/{path}", json=body)
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(field)


def test_a_trace_position_past_the_prompt_is_400(module_client):
    response = module_client.get("/api/models/gpt/trace?input_ids=1,3&position=5")
    assert response.status_code == 400 and response.get_json()["error"]["message"].startswith("position")


def test_the_gpt_page_renders_its_own_lab(module_client):
    page = module_client.get("/models/gpt").get_data(as_text=True)
    assert "js/labs/causal-lm.js" in page and "Generate, step by step" in page
    assert "What can a model learn when it may only look left?" in page
