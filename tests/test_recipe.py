"""The BERT recipe: against an independent implementation, the recording, and its own checks."""

import ast
import math
import subprocess
import sys

import pytest
import torch

from app.domain.compare import compare_replay

from .conftest import BERT_RECIPE, bert_manifest, recipe_module

bert = recipe_module(BERT_RECIPE, "model")
recipe = recipe_module(BERT_RECIPE, "run")


def reference_forward(params: dict, input_ids: torch.Tensor, segment_ids: torch.Tensor,
                      causal: bool = False) -> torch.Tensor:
    """BERT written out with plain tensor maths from the weights alone, sharing no code with model.py."""
    def linear(x, name):
        return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    def layer_norm(x, name, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * params[f"{name}.weight"] + params[f"{name}.bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    t = input_ids.shape[1]
    x = (params["word_embeddings.weight"][input_ids] + params["position_embeddings.weight"][torch.arange(t)]
         + params["segment_embeddings.weight"][segment_ids])
    x = layer_norm(x, "embedding_norm")
    heads = []
    for h in range(2):
        cols = slice(4 * h, 4 * h + 4)
        q = linear(x, "encoder.attention.query")[..., cols]
        k = linear(x, "encoder.attention.key")[..., cols]
        v = linear(x, "encoder.attention.value")[..., cols]
        scores = torch.einsum("bid,bjd->bij", q, k) / 2.0
        if causal:
            scores = scores.masked_fill(torch.ones(t, t).triu(1).bool(), -math.inf)
        heads.append(torch.einsum("bij,bjd->bid", scores.softmax(-1), v))
    x = layer_norm(x + linear(torch.cat(heads, -1), "encoder.attention.project"), "encoder.attention_norm")
    x = layer_norm(x + linear(gelu(linear(x, "encoder.up")), "encoder.down"), "encoder.output_norm")
    mlm = linear(layer_norm(gelu(linear(x, "mlm_transform")), "mlm_norm"), "mlm_decoder")
    nsp = linear(torch.tanh(linear(x[:, 0], "pooler")), "nsp_head")
    return torch.cat([mlm.flatten(1), nsp], 1)


@pytest.fixture(scope="module")
def model():
    return bert.build_model()


@pytest.mark.parametrize("causal", [False, True])
def test_matches_independent_implementation(model, causal):
    params = {k: v.double() for k, v in model.state_dict().items()}
    params["mlm_decoder.weight"] = params["word_embeddings.weight"]
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        ids = torch.randint(0, 16, (1, 6), generator=generator)
        segments = torch.tensor([[0, 0, 0, 1, 1, 1]])
        with torch.no_grad():
            ours = model(ids, segments, causal=causal).double()
        theirs = reference_forward(params, ids, segments, causal)
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_module_names_are_the_manifest_layer_ids_in_declaration_order(model):
    manifest = bert_manifest()
    modules = [name for name, _ in model.named_modules() if name]
    declared = [layer["id"] for layer in manifest["layers"] if layer["op"] not in ("Input", "Output")
                and "@" not in layer["id"]]
    assert sorted(modules) == sorted(declared)
    lines = {x["id"]: x["source"]["line"] for x in manifest["layers"] if "source" in x}
    by_line = sorted(declared, key=lines.__getitem__)
    # named_modules walks in declaration order, parents before children: the recorded lines agree.
    top_level = [m for m in modules if "." not in m]
    assert top_level == [m for m in by_line if "." not in m]


def test_graph_source_lines_point_at_the_served_model_py():
    lines = (BERT_RECIPE / "model.py").read_text().splitlines()
    for layer in bert_manifest()["layers"]:
        if "source" not in layer:
            continue
        line = lines[layer["source"]["line"] - 1].strip()
        if "@" not in layer["id"]:
            attribute = layer["id"].rsplit(".", 1)[-1]
            assert line.startswith(f"self.{attribute} = "), (layer["id"], line)
        else:
            op = layer["op"].removeprefix("torch.")
            text = " ".join(lines[layer["source"]["line"] - 1: layer["source"]["endLine"]])
            expected = {"add": ["+"], "div": ["/"], "cat": ["torch.cat"], "Flatten": ["flatten"]}.get(op)
            if expected is None:  # an op the recipe named ([graph.ops]): "unflatten · transpose (query heads)"
                names = op.split(" (")[0].split(" · ")
                expected = [f".{name}(" if name != "arange" else "torch.arange(" for name in names]
            assert all(e in text for e in expected), (layer["id"], text)


def test_model_py_parses_and_has_no_prints():
    tree = ast.parse((BERT_RECIPE / "model.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print"]


def test_replay_reproduces_every_recorded_value(model):
    report = compare_replay(bert_manifest(), recipe.replay(model))
    assert report["status"] == "passed", report["summary"]
    elements = 4 * (36 + 6 + 6 + 6 + 16 + 2 + 3)
    assert report["summary"] == {"cases": 4, "cases_failed": 0, "values": 36, "values_failed": 0, "values_widened": 0,
                                 "elements": elements, "steps_checked": 0, "checks": 4, "checks_failed": 0}


def test_a_different_weight_seed_fails(model):
    torch.manual_seed(24)
    other = bert.TinyBertPretraining().eval()
    report = compare_replay(bert_manifest(), recipe.replay(other))
    assert report["status"] == "failed"
    failed = {(c["id"], v["label"]) for c in report["cases"] for v in c["values"] if v["status"] == "failed"}
    assert ("mask-a", "Bidirectional attention · head 0") in failed
    assert ("mask-a", "Masked-token cross entropy") in failed
    # the inputs are the recipe's, not the weights': they still match
    assert ("mask-a", "Original token IDs") not in failed
    assert report["summary"]["checks_failed"] == 0


def test_checks_pass_on_the_recipe(model):
    for name, check in recipe.CHECKS.items():
        assert check(model)["passed"], name


class AlwaysCausal(bert.TinyBertPretraining):
    def forward(self, input_ids, segment_ids, causal=False):
        return super().forward(input_ids, segment_ids, causal=True)


class WrongShape(bert.TinyBertPretraining):
    def forward(self, input_ids, segment_ids, causal=False):
        return super().forward(input_ids, segment_ids, causal)[:, :97]


def seeded(cls):
    torch.manual_seed(bert.WEIGHT_SEED)
    return cls().eval()


def test_bidirectional_check_catches_a_causal_encoder():
    result = recipe.check_bidirectional(seeded(AlwaysCausal))
    assert not result["passed"]
    assert result["detail"]["bidirectional_max_shift"] == 0.0


def test_ignored_targets_check_catches_a_loss_over_all_positions(model):
    def loss_over_everything(logits, targets, selected):
        return torch.nn.functional.cross_entropy(logits, targets)

    result = recipe.check_ignored_targets(model, loss_fn=loss_over_everything)
    assert not result["passed"]
    assert result["detail"]["unselected_noise_shift"] > 1e-3


def test_tied_decoder_check_catches_untied_weights():
    untied = bert.build_model()
    untied.mlm_decoder.weight = torch.nn.Parameter(untied.word_embeddings.weight.detach().clone())
    result = recipe.check_tied_decoder(untied)
    assert not result["passed"]
    assert result["detail"]["shares_storage"] is False
    # with the decoder untied, rows no input token uses get no gradient at all
    assert result["detail"]["decoder_only_rows_grad_norm"] == 0.0


def test_packed_output_check_catches_a_wrong_shape():
    result = recipe.check_packed_output(seeded(WrongShape))
    assert not result["passed"]
    assert result["detail"]["output"] == [1, 97]


def run_standalone(folder):
    return subprocess.run([sys.executable, "run.py"], cwd=folder, capture_output=True, text=True, timeout=120)


def test_run_py_standalone_prints_a_table_and_exits_zero(tmp_path):
    # copied alone with model.py, as a user who downloads the two files has them
    for name in ("model.py", "run.py"):
        (tmp_path / name).write_bytes((BERT_RECIPE / name).read_bytes())
    done = run_standalone(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mask-b" in done.stdout and "4.5002" in done.stdout
    assert done.stdout.count("[PASS]") == 4


def test_run_py_exits_nonzero_when_a_check_fails(tmp_path):
    for name in ("model.py", "run.py"):
        (tmp_path / name).write_bytes((BERT_RECIPE / name).read_bytes())
    model_py = tmp_path / "model.py"
    # untie the decoder: the tied-weight check must fail and the exit status say so
    model_py.write_text(model_py.read_text().replace(
        "self.mlm_decoder.weight = self.word_embeddings.weight", "pass"))
    done = run_standalone(tmp_path)
    assert done.returncode == 1
    assert "[FAIL] The MLM decoder shares the token-embedding weight" in done.stdout
