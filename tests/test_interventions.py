"""Interventions: each operation and its no-op identities on every model, head ablation against independent
computations (the recipe's own weights with the head's columns cut, and transformers' BertForMaskedLM), every
bad request a 400 naming its field, the budget and the cache."""

import copy
import json
import math
import re

import pytest
import torch

from app.domain.steps import Step
from app.services.config import TestConfig
from app.services.extensions import models

from .conftest import CATALOG_SLUGS, GPT_RECIPE, lab_subject, recipe_module

URL = "/api/models/{}/interventions"
DATALAB = {"text": "the capital of france is [MASK] .", "top_k": 100}


def source(app, slug: str) -> dict:
    """A recorded case to intervene on, or a lab request where the recording holds none."""
    with app.app_context():
        return lab_subject(models.get(slug))


def first_module(client, slug: str) -> str:
    """The model's first module node after its inputs: every run reaches it."""
    layers = client.get(f"/api/models/{slug}").get_json()["layers"]
    return next(layer["id"] for layer in layers if layer["kind"] in ("layer", "module") and "@" not in layer["id"]
                and not layer["id"].startswith("python"))


def largest(value) -> float:
    """The largest |number| anywhere in a nested answer (None counts as nothing)."""
    if isinstance(value, dict):
        return max((largest(v) for v in value.values()), default=0.0)
    if isinstance(value, list):
        return max((largest(v) for v in value), default=0.0)
    return abs(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def deltas(answer: dict):
    return answer["items"] if "items" in answer else answer["delta"]


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_every_operation_and_its_identities_on_every_model(packaged_app, slug):
    client = packaged_app.test_client()
    start, node = source(packaged_app, slug), first_module(client, slug)
    plain = client.post(URL.format(slug), json=start | {"interventions": [{"node": node, "action": "scale",
                                                                            "factor": 1}]})
    assert plain.status_code == 200, plain.get_json()
    answer = plain.get_json()
    assert largest({k: v["delta"] for k, v in answer["items"].items()} if "items" in answer else answer["delta"]) == 0
    assert answer["effects"] and max(answer["effects"].values()) == 0  # scale by 1 moves nothing
    assert answer["interventions"] == [{"node": node, "action": "scale", "factor": 1.0}]
    if "case" in start:
        same = client.post(URL.format(slug), json=start | {"interventions": [
            {"node": node, "action": "patch", "from_case": start["case"]}]}).get_json()
        assert max(same["effects"].values()) == 0
        assert largest({k: v["delta"] for k, v in same["items"].items()} if "items" in same else same["delta"]) == 0
    for action in ("zero", "mean", "scale"):
        step = {"node": node, "action": action} | ({"factor": 3.0} if action == "scale" else {})
        moved = client.post(URL.format(slug), json=start | {"interventions": [step]})
        if action == "mean" and moved.status_code == 400:
            # A node whose output is one vector per input (B, features), the VAE's code say, has no positions
            # to average over: refused, and said so; any other shape must be averaged.
            message = moved.get_json()["error"]["message"]
            assert re.search(r"mean needs positions, and this output's shape is \[\d+, \d+\]$", message), message
            continue
        assert moved.status_code == 200, moved.get_json()
        assert moved.get_json()["effects"][node] > 0, action  # the node itself changed...
        assert largest(deltas(moved.get_json())) > 0, action  # ...and so did what the model answers


def test_zeroing_the_last_module_of_a_residual_branch_equals_removing_the_branch(client):
    """GPT: zeroing block 0's MLP (c_proj ends its branch, the MLP module is the branch) gives the distribution
    of the recipe's model whose block 0 adds its attention branch alone."""
    prompt = [1, 5, 7, 3]
    for node in ("h.0.mlp", "h.0.mlp.c_proj"):
        answer = client.post(URL.format("gpt"), json={"request": {"input_ids": prompt}, "interventions": [
            {"node": node, "action": "zero"}]}).get_json()
        model = recipe_module(GPT_RECIPE, "model").build_model()
        block = model.h[0]
        block.forward = lambda x, causal=True, block=block: x + block.attn(block.ln_1(x), causal)  # no MLP branch
        with torch.no_grad():
            expected = model(torch.tensor([prompt])).softmax(-1)[0]
        assert torch.allclose(torch.tensor(answer["items"]["next_token_probs"]["after"]), expected, atol=1e-6), node
        assert not torch.allclose(torch.tensor(answer["items"]["next_token_probs"]["before"]), expected, atol=1e-4)


def test_the_plain_run_is_kept_for_the_next_intervention_on_the_same_input():
    """A second intervention on an input runs only the changed run, and answers as if nothing were kept; another
    key (another input, recipe or checkpoint) runs afresh."""
    from app.compute.intervene import intervene
    from app.domain.lru import SizedLRU

    entry = recipe_module(GPT_RECIPE, "lab").live_run
    calls = []

    def counted(**args):
        calls.append(args)
        return entry(**args)

    plain_runs, args = SizedLRU(1 << 26), {"input_ids": [1, 5, 7, 3]}
    zero = [Step(node="h.0.mlp", action="zero", target="h.0.mlp", on="output")]
    scale = [Step(node="h.1.mlp", action="scale", factor=2.0, target="h.1.mlp", on="output")]
    assert not intervene(counted, args, zero, [], 0, "GPT", plain_runs, "run-key:input")["plain_run_cached"]
    assert len(calls) == 2 and len(plain_runs) == 1
    kept = intervene(counted, args, scale, [], 0, "GPT", plain_runs, "run-key:input")
    assert len(calls) == 3 and kept["plain_run_cached"]  # the plain run came from those kept
    assert kept | {"plain_run_cached": False} == intervene(entry, args, scale, [], 0, "GPT")  # as if nothing were kept
    intervene(counted, {"input_ids": [1, 5]}, scale, [], 0, "GPT", plain_runs, "run-key:other input")
    assert len(calls) == 5 and len(plain_runs) == 2


def test_a_patch_takes_its_source_from_a_kept_run_and_answers_as_if_it_had_run_it():
    """A patch's source whose run the process keeps (a recorded case, kept at warm-up) is not run again: its
    outputs come from the kept run, exactly as a run of it would give them. A head's patch needs the
    projection's input, which no kept run holds, so its source runs."""
    from app.compute.intervene import intervene, plain_run
    from app.domain.lru import SizedLRU

    entry = recipe_module(GPT_RECIPE, "lab").live_run
    calls = []

    def counted(**args):
        calls.append(args)
        return entry(**args)

    plain_runs, here, there = SizedLRU(1 << 26), {"input_ids": [1, 5, 7, 3]}, {"input_ids": [2, 2, 9, 4]}
    for args, key in ((here, "here"), (there, "there")):
        plain_run(entry, args, 0, "GPT", plain_runs, key)
    patch = [Step(node="h.0.mlp", action="patch", source=0, target="h.0.mlp", on="output")]
    kept = intervene(counted, here, patch, [there], 0, "GPT", plain_runs, "here", ["there"])
    assert len(calls) == 1 and kept["plain_run_cached"]  # the changed run alone
    ran = intervene(entry, here, patch, [there], 0, "GPT")
    assert kept | {"plain_run_cached": False} == ran and max(ran["effects"].values()) > 0
    head = [Step(node="h.0.attn", action="patch", head=1, heads=4, source=0, target="h.0.attn.c_proj",
             on="input")]
    calls.clear()
    intervene(counted, here, head, [there], 0, "GPT", plain_runs, "here", ["there"])
    assert len(calls) == 2  # the source ran for its projection's input, then the changed run


class Shifted(torch.nn.Module):
    """Two layers, the first's output written into in place after it answered: `a`, then a + 1 into `b`."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        y.add_(1.0)  # written into after `a` answered it
        return self.b(y)


def test_an_output_the_recipe_writes_into_in_place_is_measured_as_its_module_made_it():
    """Outputs are kept without copying them; where the recipe writes into one later in the run, the run is
    made again with copies, so that a node's value and its change are what the module answered."""
    from app.compute.intervene import intervene, run_recording

    torch.manual_seed(0)
    model, x = Shifted().eval(), torch.randn(2, 3)

    @torch.no_grad()
    def entry() -> list:
        return model(x).tolist()

    with torch.no_grad():
        made = model.a(x)
    assert torch.equal(run_recording(entry, {}, 0, "Shifted", lambda node: True, set())[1]["a"], made)
    answer = intervene(entry, {}, [Step(node="a", action="scale", factor=3.0, target="a", on="output")],
                       [], 0, "Shifted")
    assert answer["effects"]["a"] == pytest.approx(2.0)  # ||3a - a|| / ||a||, not measured on a + 1
    with torch.no_grad():
        assert torch.allclose(torch.tensor(answer["after"]), model.b(3 * made + 1), atol=1e-6)


@pytest.mark.parametrize("window", [1, 700, 5000])  # bytes: an output a window, a few, most of the run
def test_a_run_too_large_for_one_window_is_measured_a_window_at_a_time_as_if_whole(monkeypatch, window):
    """A run whose outputs pass WINDOW_BYTES (the DDPM's held-out split: 2.1 GB) is measured a window at a time,
    each made again from the seed: the answer, the effects and the outline are those of the run measured whole,
    and no window's run is kept for the next change."""
    from app.compute import intervene as module
    from app.domain.lru import SizedLRU

    entry = recipe_module(GPT_RECIPE, "lab").live_run
    here, there = {"input_ids": [1, 5, 7, 3, 2, 9]}, {"input_ids": [2, 2, 9, 4, 4, 1]}
    steps = [[Step(node="h.0.mlp", action="scale", factor=3.0, target="h.0.mlp", on="output")],
             [Step(node="h.1.attn", action="patch", source=0, target="h.1.attn", on="output")]]
    whole = [module.intervene(entry, here, each, [there], 0, "GPT") for each in steps]
    outline = module.outlines(entry, [here, there], 0, "GPT")
    monkeypatch.setattr(module, "WINDOW_BYTES", window)
    _, first = module.window_run(entry, here, 0, "GPT", 0)
    assert first.rest is not None and first.bytes() <= max(window, first.parts[0].nbytes)
    plain_runs = SizedLRU(1 << 26)
    for each, measured in zip(steps, whole, strict=True):
        windowed = module.intervene(entry, here, each, [there], 0, "GPT", plain_runs, "here")
        assert windowed["before"] == measured["before"] and windowed["after"] == measured["after"]
        assert windowed["effects"].keys() == measured["effects"].keys()
        for node, moved in measured["effects"].items():  # the same squares, summed in blocks of another size
            assert windowed["effects"][node] == pytest.approx(moved, rel=1e-6, abs=1e-12), node
    assert max(whole[0]["effects"].values()) > 0 and len(plain_runs) == 0
    zeroed = module.intervene(entry, here, [Step(node="h.0.mlp", action="zero", target="h.0.mlp", on="output")],
                              [], 0, "GPT")
    assert zeroed["effects"]["h.0.mlp"] == 1.0  # each window's change summed as its baseline was
    assert module.outlines(entry, [here, there], 0, "GPT", plain_runs, ["here", "there"]) == outline
    assert len(plain_runs) == 0


def test_an_output_written_into_in_place_is_measured_as_made_in_every_window(monkeypatch):
    """A window made again copies outputs that the recipe writes into in place, as a whole run does."""
    from app.compute import intervene as module

    torch.manual_seed(0)
    model, x = Shifted().eval(), torch.randn(2, 3)

    @torch.no_grad()
    def entry() -> list:
        return [model(x).tolist(), model(2 * x).tolist()]

    scale = [Step(node="a", action="scale", factor=3.0, target="a", on="output")]
    whole = module.intervene(entry, {}, scale, [], 0, "Shifted")
    monkeypatch.setattr(module, "WINDOW_BYTES", 1)
    windowed = module.intervene(entry, {}, scale, [], 0, "Shifted")
    assert windowed["after"] == whole["after"] and windowed["effects"]["a"] == pytest.approx(2.0)
    assert windowed["effects"] == pytest.approx(whole["effects"], rel=1e-6)


def test_a_recipes_own_hooks_see_the_changed_output_and_torch_is_left_as_it_was():
    """A run's calls pass through torch's public global module hooks, which run before a module's own: a recipe
    that captures a module's output with a hook of its own (attention maps) captures the changed output, input
    changes reach the module's own pre-hooks, a copy of a module made during the run is no part of the graph, and
    after the run (or a failed one) torch's call and the modules' hooks are as they were, and no global hook is
    left."""
    from app.compute.intervene import Refused, intervene

    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    torch.manual_seed(0)
    model, x = Two().eval(), torch.randn(2, 3)
    call, hooks = torch.nn.Module._call_impl, dict(model.a._forward_hooks)

    @torch.no_grad()
    def entry() -> dict:
        seen: dict[str, torch.Tensor] = {}
        handles = [model.a.register_forward_hook(lambda _m, _a, out: seen.__setitem__("a", out)),
                   model.b.register_forward_pre_hook(lambda _m, args: seen.__setitem__("b in", args[0]))]
        try:
            out = model(x)
            answer = {"a": seen["a"].tolist(), "b in": seen["b in"].tolist(), "out": out.tolist()}
            copied = copy.deepcopy(model.a)  # with the recipe's hooks, and ours for the run
            answer["copy"] = copied(x).tolist()  # no part of the graph: as it is
        finally:
            for handle in handles:
                handle.remove()
        return answer

    answer = intervene(entry, {}, [Step(node="a", action="zero", target="a", on="output")], [], 0, "Two")
    assert torch.count_nonzero(torch.tensor(answer["before"]["a"])) > 0
    assert answer["after"]["a"] == answer["after"]["b in"] == torch.zeros(2, 3).tolist()
    with torch.no_grad():
        assert torch.allclose(torch.tensor(answer["after"]["out"]), model.b(torch.zeros(2, 3)), atol=1e-6)
    assert answer["effects"]["a"] == 1.0 and answer["effects"]["b"] > 0
    with torch.no_grad():
        assert answer["after"]["copy"] == model.a(x).tolist()
    assert torch.nn.Module._call_impl is call and dict(model.a._forward_hooks) == hooks
    with pytest.raises(Refused):
        intervene(entry, {}, [Step(node="a", action="scale", factor=float("nan"), target="a", on="output"),
                              Step(node="c", action="zero", target="c", on="output")], [], 0, "Two")
    assert torch.nn.Module._call_impl is call and not model.a._forward_hooks
    with torch.no_grad():
        assert torch.equal(model(x), model.b(model.a(x)))  # no hook of the run answers for the model any more
    assert not torch.nn.modules.module._global_forward_hooks and not torch.nn.modules.module._global_forward_pre_hooks


def test_a_change_is_measured_on_the_nodes_both_runs_share_alike():
    """||after - before|| / ||before|| per node, from the outputs or from the plain run laid out once; a node
    the changed run skipped or shaped otherwise (a decoder that stopped elsewhere) is left out, as are
    integer outputs."""
    from app.compute.intervene import Baseline, effects

    before = {"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([1.0]), "c": torch.ones(2, 2), "i": torch.tensor([1])}
    shorter = {"a": torch.tensor([6.0, 8.0]), "c": torch.ones(3, 2), "d": torch.ones(1)}
    for base in (before, Baseline.from_outputs(before)):
        assert effects(base, shorter) == pytest.approx({"a": 1.0})
        assert effects(base, {"a": torch.zeros(2), "b": torch.tensor([1.5]), "c": torch.ones(2, 2)}) == \
            pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})
    assert effects(before, {}) == {}
    # Measured on copies: neither run's outputs are written into, nor kept as views (one node or several, in
    # single or double precision).
    for outputs in ({"a": torch.tensor([3.0, 4.0])}, {"a": torch.tensor([3.0, 4.0]), "b": torch.ones(2)},
                    {"a": torch.tensor([3.0, 4.0], dtype=torch.float64)}):
        changed = {node: tensor * 2 for node, tensor in outputs.items()}
        base = Baseline.from_outputs(outputs)
        assert effects(base, changed) == pytest.approx(dict.fromkeys(outputs, 1.0))
        assert all(torch.equal(changed[node], tensor * 2) for node, tensor in outputs.items())
        outputs["a"].add_(1.0)
        assert base.values[:2].tolist() == [3.0, 4.0]


@pytest.mark.parametrize("shape", [(3, 5), (4, 16)])  # summed a value, or a block of 32, at a time
def test_a_change_measured_as_the_run_goes_reads_as_the_kept_outputs_measured_whole(monkeypatch, shape):
    """A changed run is measured as it goes, a chunk of outputs at a time (intervene.Moved), as effects()
    measures outputs kept to the end: both read what float64 arithmetic reads, whatever the chunk, with outputs
    skipped (a gap in the baseline's order) or of another precision, and squares past float32's range; an
    output written into before its chunk was measured marks the measurement spoilt (`intact`)."""
    from app.compute import intervene as iv

    torch.manual_seed(0)
    keys = [iv.occurrence(node, call) for call in range(7) for node in ("a", "b", "c")]  # a sampler's 7 calls
    before = {key: torch.randn(shape) for key in keys}
    after = {key: before[key] * (1 + 0.1 * i) - 0.01 * (i % 3) for i, key in enumerate(keys)}
    assert iv.Baseline.from_outputs(before).block == (1 if shape == (3, 5) else 32)

    def exact(after: dict) -> dict[str, float]:
        def total(node: str, values) -> float:
            return sum((values(key).double() ** 2).sum().item() for key in keys if iv.node_of(key) == node
                       and key in after)
        return {node: math.sqrt(total(node, lambda k: after[k].double() - before[k].double())
                                / total(node, lambda k: before[k])) for node in "abc"}

    def measured(outputs: dict) -> iv.Moved:
        moved = iv.Moved(iv.Baseline.from_outputs(before))
        for key in keys:
            moved.take(iv.node_of(key), outputs[key])
        return moved

    gaps = {key: tensor for i, key in enumerate(keys) if i % 4 != 1 for tensor in [after[key]]}
    mixed = {key: tensor.double() if i % 3 == 0 else tensor for i, (key, tensor) in enumerate(after.items())}
    huge = {key: tensor * 1e30 for key, tensor in after.items()}  # squares past float32's largest number
    for chunk in (1, 16, 40, 1 << 17):
        monkeypatch.setattr(iv, "CHUNK", chunk)
        for outputs in (after, mixed, huge):
            moved = measured(outputs)
            assert moved.effects() == pytest.approx(exact(outputs), rel=1e-6) and moved.intact
            assert iv.effects(iv.Baseline.from_outputs(before), outputs) == pytest.approx(exact(outputs), rel=1e-6)
        assert iv.effects(iv.Baseline.from_outputs(before), gaps) == pytest.approx(exact(gaps), rel=1e-6)
        zeroed = measured({key: before[key] * 0.0 for key in keys}).effects()
        assert zeroed == dict.fromkeys("abc", 1.0)  # exactly: summed as the baseline was, a chunk or whole
    written = {key: tensor.clone() for key, tensor in after.items()}
    moved = measured(written)
    written[keys[-1]].add_(1.0)  # after its module answered, before its chunk was measured
    moved.effects()
    assert not moved.intact


class Twice(torch.nn.Module):
    """A model a run calls twice (as a sampler calls its network at every step)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            self.scale.weight.fill_(2.0)

    def forward(self, x):
        return self.scale(x)


def test_a_node_met_in_every_call_of_the_model_is_patched_call_by_call_and_measured_over_all_of_them():
    """A run that calls its model twice meets `scale` twice: a patch takes each call's output from the source's
    same call, and the change is measured over both outputs together."""
    from app.compute.intervene import intervene

    model = Twice()

    def run(x: float) -> list[float]:
        first = model(torch.tensor([[x]]))
        return [first.item(), model(first + 1).item()]  # the second call reads the first

    patch = [Step(node="scale", action="patch", source=0, target="scale", on="output")]
    answer = intervene(run, {"x": 1.0}, patch, [{"x": 3.0}], 0, "Twice")
    assert answer["before"] == [2.0, 6.0] and answer["after"] == [6.0, 14.0]  # the source's calls: 6, then 14
    # Both calls' outputs moved: ||(6, 14) - (2, 6)|| / ||(2, 6)||.
    assert answer["effects"]["scale"] == pytest.approx(math.hypot(4, 8) / math.hypot(2, 6))
    same = intervene(run, {"x": 1.0}, patch, [{"x": 1.0}], 0, "Twice")
    assert same["after"] == same["before"] and same["effects"]["scale"] == 0.0
    scaled = intervene(run, {"x": 1.0}, [Step(node="scale", action="scale", factor=0.5, target="scale",
                                           on="output")], [], 0, "Twice")
    assert scaled["after"] == [1.0, 2.0]  # halved at both calls: 2 / 2, then (1 + 1) * 2 / 2


def test_ablating_a_head_equals_cutting_its_columns_from_the_output_projection(client):
    """GPT: zeroing head 1 of block 1 gives the distribution of the recipe's model whose c_proj ignores that
    head's context dimensions, to float32 tolerance."""
    prompt = [1, 5, 7, 3]
    answer = client.post(URL.format("gpt"), json={"request": {"input_ids": prompt}, "interventions": [
        {"node": "h.1.attn", "action": "zero", "head": 1}]}).get_json()
    after = answer["items"]["next_token_probs"]["after"]
    model_module = recipe_module(GPT_RECIPE, "model")
    model = model_module.build_model()
    attention = model.transformer.h[1].attn if hasattr(model, "transformer") else model.h[1].attn
    width = attention.c_proj.in_features // attention.n_head
    with torch.no_grad():
        attention.c_proj.weight[:, width:2 * width] = 0
        expected = model(torch.tensor([prompt])).softmax(-1)[0]
    assert torch.allclose(torch.tensor(after), expected, atol=1e-6)
    assert max(abs(d) for row in answer["items"]["next_token_probs"]["delta"] for d in row) > 1e-4


def test_ablating_a_bert_base_head_matches_transformers(masked_lm_app, bert_checkpoint):
    """The DataLab's checkpoint with head 2 of layer 1 zeroed gives the logits transformers' BertForMaskedLM
    gives with that head's context zeroed by a forward hook."""
    import transformers

    client = masked_lm_app.test_client()
    answer = client.post(URL.format("bert-base"), json={"request": DATALAB, "interventions": [
        {"node": "layers.1.attention", "action": "zero", "head": 2}]})
    assert answer.status_code == 200, answer.get_json()
    after = answer.get_json()["after"]
    reference = transformers.BertForMaskedLM.from_pretrained(bert_checkpoint).eval()
    heads = reference.config.num_attention_heads
    width = reference.config.hidden_size // heads

    def cut(module, args, output):
        context = output[0].clone()
        context[..., 2 * width:3 * width] = 0
        return (context, *output[1:])

    reference.bert.encoder.layer[1].attention.self.register_forward_hook(cut)
    ids = [token["id"] for token in after["tokens"]]
    with torch.no_grad():
        logits = reference(torch.tensor([ids])).logits[0, after["position"]]
    for row in after["top"]:
        assert math.isclose(row["logit"], logits[row["id"]].item(), abs_tol=1e-4), row
    assert answer.get_json()["delta"]["top"] is not None


@pytest.mark.parametrize(("step", "message"), [
    ({"node": "nope", "action": "zero"}, "interventions[0].node: 'nope' is not a node of the recorded graph"),
    ({"node": "add@GPT#0", "action": "zero"}, "interventions[0].node: 'add@GPT#0' is an op, not a module"),
    ({"node": "input:idx", "action": "zero"}, "interventions[0].node: 'input:idx' is an input, not a module"),
    ({"node": "h.0.attn", "action": "melt"}, "interventions[0].action: must be one of zero, mean, scale, patch"),
    ({"node": "h.0.mlp", "action": "zero", "head": 0}, "interventions[0].head: 'h.0.mlp' has no heads"),
    ({"node": "h.0.attn", "action": "zero", "head": -1}, "interventions[0].head: must be a head number"),
    ({"node": "h.0.attn", "action": "zero", "head": 2}, "interventions[0].head: 2 is not a head of h.0.attn"),
    ({"node": "h.0.attn", "action": "scale"}, "interventions[0].factor: a scale needs a finite number"),
    ({"node": "h.0.attn", "action": "zero", "factor": 2}, "interventions[0].factor: only a scale takes a factor"),
    ({"node": "h.0.attn", "action": "patch"}, "interventions[0].from_case: must be one of the recorded cases"),
    ({"node": "h.0.attn", "action": "patch", "from_case": "repeats"}, "interventions[0].from_case: its h.0.attn has "
                                                                   "shape"),
    ({"node": "h.0.attn", "action": "zero", "layer": 1}, "interventions[0].layer: unknown field"),
])
def test_each_bad_intervention_is_a_400_naming_its_field(client, step, message):
    response = client.post(URL.format("gpt"), json={"request": {"input_ids": [1, 5, 7]}, "interventions": [step]})
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"]["message"].startswith(message)


@pytest.mark.parametrize("step", [
    {"node": "h.0.attn", "action": "scale", "factor": 1e7}, {"node": "h.0.attn", "action": "scale", "factor": "2"},
    {"node": "h.0.attn", "action": "scale", "factor": True}, {"node": "h.0.attn", "action": "zero", "head": True},
    {"node": "h.0.attn", "action": "zero", "head": -1}, {"node": 5, "action": "zero"}, {"action": "zero"},
    {"node": "h.0.attn", "action": "melt"}, {"node": "h.0.attn", "action": "zero", "layer": 1}, "zero h.0",
])
def test_an_intervention_the_documents_schema_refuses_the_api_refuses(client, step):
    """One declaration: the request body's schema in the served document is what the API validates with, so each
    intervention the schema refuses is a 400 naming that intervention, and the boundary of each rule is the same."""
    import jsonschema

    document = client.get("/api/openapi.json").get_json()
    body = document["paths"]["/api/models/{slug}/interventions"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"] | {"components": document["components"]}
    validator = jsonschema.Draft202012Validator(schema)
    refused = {"case": "pi", "interventions": [step]}
    assert not validator.is_valid(refused)
    response = client.post(URL.format("gpt"), json=refused)
    assert response.status_code == 400 and response.get_json()["error"]["message"].startswith("interventions[0]")
    edge = {"case": "pi", "interventions": [{"node": "h.0.attn", "action": "scale", "factor": -1e6}]}
    assert validator.is_valid(edge) and client.post(URL.format("gpt"), json=edge).status_code == 200


@pytest.mark.parametrize(("body", "message"), [
    ({"interventions": [{"node": "h.0", "action": "zero"}]}, "case: send either a recorded case or a request"),
    ({"case": "pi", "request": {"input_ids": [1]}, "interventions": []}, "case: send either"),
    ({"case": "owl", "interventions": [{"node": "h.0", "action": "zero"}]}, "case: must be one of the recorded cases"),
    ({"request": {"input_ids": "x"}, "interventions": [{"node": "h.0", "action": "zero"}]},
     "request.input_ids: must be a list of integers"),
    ({"case": "pi", "interventions": []}, "interventions: send a list of one or more"),
    ({"case": "pi", "interventions": [{"node": "h.0", "action": "zero"}] * 17}, "interventions: at most 16"),
    ({"case": "pi", "endpoint": "nowhere", "interventions": []}, "endpoint: must be one of runs, generations, trace"),
    ({"case": "pi", "why": 1}, "why: unknown field"),
    ([1, 2], "body: send a JSON object"),
])
def test_each_bad_request_is_a_400_naming_its_field(client, body, message):
    response = client.post(URL.format("gpt"), json=body)
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(message)


def test_interventions_are_kept_by_everything_they_depend_on_and_count_against_the_budget(make_app):
    app = make_app(type("Budget", (TestConfig,), {"COMPUTE_BUDGET": "3 per hour"}))
    client = app.test_client()
    body = {"case": "pi", "interventions": [{"node": "h.1.attn", "action": "zero", "head": 0}]}
    first = client.post(URL.format("gpt"), json=body).get_json()
    again = client.post(URL.format("gpt"), json=body).get_json()
    other = client.post(URL.format("gpt"), json=body | {"interventions": [
        {"node": "h.1.attn", "action": "zero", "head": 1}]}).get_json()
    assert (first["cached"], again["cached"], other["cached"]) == (False, True, False)
    assert again["items"] == first["items"] and other["items"] != first["items"]
    third = body | {"interventions": [{"node": "h.0.attn", "action": "zero", "head": 1}]}
    assert client.post(URL.format("gpt"), json=third).status_code == 200  # the third run: the budget is spent
    assert client.post(URL.format("gpt"), json=body).status_code == 200  # a kept answer spends nothing
    fourth = body | {"interventions": [{"node": "h.0.attn", "action": "zero", "head": 0}]}
    assert client.post(URL.format("gpt"), json=fourth).status_code == 429


def test_the_options_say_what_each_node_can_do_and_keep_the_run_for_the_change_asked_next(make_app):
    """POST .../interventions/options: every module node of the graph with the actions that run on this case (or
    lab request), the other cases a patch may take it from (the same shapes), and why not the rest; in the served
    document's shape, one run of the budget (kept by its content like any answer), and the run kept, so that the
    change asked next runs only the changed run."""
    from jsonschema import Draft202012Validator

    app = make_app(type("Budget", (TestConfig,), {"COMPUTE_BUDGET": "3 per hour"}))
    client = app.test_client()
    url = "/api/models/gpt/interventions/options"
    answer = client.post(url, json={"case": "pi"}).get_json()
    document = client.get("/api/openapi.json").get_json()
    schema = document["components"]["schemas"]["InterventionOptions"] | {"components": document["components"]}
    assert not list(Draft202012Validator(schema).iter_errors(answer))
    nodes = answer["nodes"]
    assert (answer["case"], answer["endpoint"]) == ("pi", "runs")
    # A block's list is never called itself; every block is, on the case's 4 positions, as the cases of the
    # same length are (the test split answers another endpoint: no source).
    never = "this input's run gets no output of numbers from h to change (it is not called itself)"
    assert nodes["h"] == {"actions": [], "from_cases": [], "why_not": dict.fromkeys(
        ("zero", "mean", "scale", "patch"), never)}
    assert nodes["h.0.mlp"] == {"actions": ["zero", "mean", "scale", "patch"],
                                "from_cases": ["repeats", "falling", "in-order"], "why_not": {}}
    assert client.post(URL.format("gpt"), json={"case": "pi", "interventions": [
        {"node": "h.0.mlp", "action": "patch", "from_case": "falling"}]}).get_json()["plain_run_cached"]
    # A lab request of another length: no case to patch from; its run is kept for the change asked next.
    other = client.post(url, json={"request": {"input_ids": [1, 5]}}).get_json()["nodes"]["h.0.mlp"]
    assert other == {"actions": ["zero", "mean", "scale"], "from_cases": [], "why_not": {
        "patch": "no other recorded case runs h.0.mlp with the same shapes as this input"}}
    assert client.post(url, json={"case": "pi"}).status_code == 200  # kept: the budget is not spent again
    assert client.post(url, json={"request": {"input_ids": [1, 5, 7]}}).status_code == 429  # the fourth run
    for body, message in (({"case": "pi", "interventions": []}, "interventions: unknown field"),
                          ({}, "case: send either a recorded case or a request"), ([1], "body: send a JSON")):
        refused = client.post(url, json=body)
        assert refused.status_code == 400 and refused.get_json()["error"]["message"].startswith(message)


def test_a_lab_endpoint_answers_the_intervened_run(client):
    request = {"input_ids": [1, 5, 7, 3]}
    plain = client.post("/api/models/gpt/runs", json=request).get_json()
    step = {"node": "h.0.mlp", "action": "zero"}
    intervened = client.post("/api/models/gpt/runs", json=request | {"interventions": [step]}).get_json()
    direct = client.post(URL.format("gpt"), json={"request": request, "interventions": [step]}).get_json()
    assert intervened["interventions"] == [step] and intervened["effects"]["h.0.mlp"] > 0
    probs = next(m for m in intervened["case"]["matrices"] if m["key"] == "next_token_probs")["values"]
    assert probs == direct["items"]["next_token_probs"]["after"]
    assert probs != next(m for m in plain["case"]["matrices"] if m["key"] == "next_token_probs")["values"]


def test_a_heads_declaration_is_resolved_against_the_recorded_graph():
    import json

    from app.domain.interventions import Heads, declared_heads
    from app.domain.labs.fields import DeclarationError
    from app.services.config import PROJECT_ROOT

    manifest = json.loads((PROJECT_ROOT / "manifests" / "gpt" / "manifest.json").read_text())
    declared = {"heads": {"h.*.attn": {"count": "n_head", "projection": "h.*.attn.c_proj"}}}
    assert declared_heads(declared, manifest) == {"h.0.attn": Heads("n_head", "h.0.attn.c_proj"),
                                                  "h.1.attn": Heads("n_head", "h.1.attn.c_proj")}
    for heads, message in [({"blocks.*.attn": {"count": 2, "projection": "blocks.*.attn.proj"}}, "names no module"),
                           ({"h.*.attn": {"count": 2, "projection": "h.*.mlp.c_proj"}}, "is not a recorded part"),
                           ({"h.*.attn": {"count": 0, "projection": "h.*.attn.c_proj"}}, "needs a count")]:
        with pytest.raises(DeclarationError, match=message):
            declared_heads({"heads": heads}, manifest)


def test_a_difference_taken_at_once_is_the_one_taken_number_by_number():
    """An intervention's delta: arrays of numbers are subtracted at once, and give what a subtraction number by
    number gives (an independent one here), through nesting, ragged lists, bools, strings and huge integers."""
    import random

    from app.services.interventions import difference

    def reference(before, after):
        if isinstance(before, bool) or isinstance(after, bool):
            return None
        if isinstance(before, int | float) and isinstance(after, int | float):
            return after - before
        if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
            return [reference(b, a) for b, a in zip(before, after, strict=True)]
        if isinstance(before, dict) and isinstance(after, dict):
            return {k: reference(v, after[k]) for k, v in before.items() if k in after}
        return None

    draw = random.Random(0)
    layers = [{"vector": [draw.gauss(0, 1) for _ in range(64)], "ids": [draw.randrange(100) for _ in range(8)],
               "grid": [[draw.random() for _ in range(5)] for _ in range(3)], "token": "paris"} for _ in range(4)]
    moved = [{"vector": [v + draw.gauss(0, 1e-3) for v in layer["vector"]], "ids": [i + 1 for i in layer["ids"]],
              "grid": [[v * 2 for v in row] for row in layer["grid"]], "token": "rome"} for layer in layers]
    pairs = [(layers, moved), ([[1, 2], [3]], [[1, 2], [4]]), ([True, False], [False, True]), ([2**63, 1], [1, 2]),
             ([2**62, 0], [-(2**62), 0]), ([1.5, 2], [1, 2]), ([[1.0, 2.0]], [[1.0]]), ([None, 1.0], [1.0, 2.0]),
             ([], [])]
    for before, after in pairs:
        assert json.dumps(difference(before, after)) == json.dumps(reference(before, after)), (before, after)
