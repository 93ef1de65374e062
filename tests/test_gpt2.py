"""The GPT-2 DataLab: every stage held to transformers' own GPT2LMHeadModel on small random checkpoints saved with
save_pretrained, generation and patching held to it too, the checkpoint found or explained, and the API's answers
and refusals."""

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from app.services.config import PROJECT_ROOT, TestConfig

from .conftest import recipe_module
from .gpt2_checkpoints import make_checkpoint

RECIPE = PROJECT_ROOT / "recipes" / "gpt2"
PROMPT = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
URL = "/api/models/gpt2/{}"


@pytest.fixture
def gpt2_app(make_app, gpt2_checkpoint):
    app = make_app(TestConfig)
    app.config["GPT2_CHECKPOINT"] = str(gpt2_checkpoint)
    yield app


def reference(folder: Path, text: str) -> dict:
    """transformers' GPT2LMHeadModel on the text: ids, hidden states, attentions and the last position's logits."""
    import torch
    import transformers

    model = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    encoding = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**encoding, output_hidden_states=True, output_attentions=True)
    return {"model": model, "ids": encoding.input_ids[0].tolist(), "hidden": out.hidden_states,
            "attentions": out.attentions, "logits": out.logits[0, -1]}


def worst(ours, theirs) -> float:
    import torch

    return (torch.tensor(ours, dtype=torch.float32) - theirs.detach().float()).abs().max().item()


@pytest.mark.parametrize(("weights", "tokenizer"), [("safetensors", "tokenizer.json"), ("bin", "vocab.json")])
def test_every_stage_matches_gpt2_lm_head_model(tmp_path, weights, tokenizer):
    folder = make_checkpoint(tmp_path / "ckpt", seed=3, safetensors=weights == "safetensors",
                             tokenizer_json=tokenizer == "tokenizer.json")
    assert (folder / "tokenizer.json").is_file() == (tokenizer == "tokenizer.json")
    lab = recipe_module(RECIPE, "lab")
    answer = lab.trace(str(folder), PROMPT, top_k=8)
    ref = reference(folder, PROMPT)
    assert [t["id"] for t in answer["tokens"]] == ref["ids"]
    assert "".join(t["text"] for t in answer["tokens"]) == PROMPT
    blocks = len(ref["attentions"])
    assert len(answer["attention"]) == blocks == 2 and len(answer["residual"]) == len(ref["hidden"]) == 3
    for b in range(blocks):
        assert worst(answer["attention"][b], ref["attentions"][b][0]) < 1e-6, b
    model = ref["model"]
    for i, stream in enumerate(answer["residual"]):
        # transformers' last hidden state is after the final LayerNorm; the stream before it is ours
        theirs = ref["hidden"][i][0, -1] if i < blocks else None
        if theirs is not None:
            assert worst(stream["last"], theirs) < 1e-5, i
            assert worst(stream["norms"], ref["hidden"][i][0].norm(dim=-1)) < 1e-5
    import torch

    final = model.transformer.ln_f(torch.tensor(answer["residual"][-1]["last"]))
    assert worst(final.tolist(), ref["hidden"][-1][0, -1]) < 1e-5
    logits, probabilities = ref["logits"], ref["logits"].softmax(-1)
    assert [t["id"] for t in answer["top"]] == logits.topk(8).indices.tolist()
    for row in answer["top"]:
        assert abs(row["logit"] - logits[row["id"]].item()) < 1e-5
        assert abs(row["probability"] - probabilities[row["id"]].item()) < 1e-6
    assert answer["prediction"]["id"] == int(logits.argmax())
    with torch.no_grad():  # the logit lens: HF's own final LayerNorm and tied head on each hidden state
        lens = model.lm_head(model.transformer.ln_f(torch.stack([h[0, -1] for h in ref["hidden"][:-1]])))
    for i, row in enumerate(answer["lens"][:-1]):
        assert abs(row["probability"] - lens[i].softmax(-1)[answer["prediction"]["id"]].item()) < 1e-6
        assert [t["id"] for t in row["top"]] == lens[i].topk(3).indices.tolist()
    assert answer["lens"][-1]["rank"] == 1
    json.dumps(answer, allow_nan=False)


def test_a_bare_gpt2_model_reads_its_tied_head(tmp_path):
    folder = make_checkpoint(tmp_path / "bare", head="GPT2Model", seed=4)
    answer = recipe_module(RECIPE, "lab").trace(str(folder), PROMPT)
    ref = reference(folder, PROMPT)  # GPT2LMHeadModel from a GPT2Model's files: the head tied to wte
    assert abs(answer["top"][0]["logit"] - ref["logits"][answer["top"][0]["id"]].item()) < 1e-5


def test_generation_matches_transformers_greedy_and_seeded_sampling_repeats(gpt2_checkpoint):
    import torch

    lab = recipe_module(RECIPE, "lab")
    greedy = lab.generate(str(gpt2_checkpoint), PROMPT, steps=4)
    ref = reference(gpt2_checkpoint, PROMPT)
    ids = torch.tensor([ref["ids"]])
    with torch.no_grad():
        for _ in range(4):
            ids = torch.cat([ids, ref["model"](ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert [s["id"] for s in greedy["steps"]] == ids[0, -4:].tolist()
    first = lab.generate(str(gpt2_checkpoint), PROMPT, steps=5, strategy="sample", seed=7, temperature=1.5)
    assert first == lab.generate(str(gpt2_checkpoint), PROMPT, steps=5, strategy="sample", seed=7, temperature=1.5)
    narrow = lab.generate(str(gpt2_checkpoint), PROMPT, steps=5, strategy="sample", seed=7, top_k=1)
    assert [s["id"] for s in narrow["steps"]] == [s["id"] for s in lab.generate(str(gpt2_checkpoint), PROMPT,
                                                                                   steps=5)["steps"]]
    for step in first["steps"]:
        assert abs(sum(t["probability"] for t in step["top"]) - 1) < 1 and step["top"][0]["probability"] >= \
            step["top"][-1]["probability"]


def test_patching_each_head_equals_transformers_with_that_head_replaced(gpt2_checkpoint):
    """Each cell of the grid, recomputed independently: transformers' model with one head's slice of the output
    projection's input replaced by the corrupted run's; and patching from the prompt itself moves nothing."""
    import torch

    lab = recipe_module(RECIPE, "lab")
    answer = lab.patching(str(gpt2_checkpoint), PROMPT, CORRUPTED)
    ref = reference(gpt2_checkpoint, PROMPT)
    model, head_dim = ref["model"], model_head_dim(ref["model"])
    clean_ids = torch.tensor([ref["ids"]])
    corrupted_ids = torch.tensor([reference(gpt2_checkpoint, CORRUPTED)["ids"]])
    kept = {}

    def keep(layer):
        return lambda _m, args: kept.__setitem__(layer, args[0].clone())

    handles = [block.attn.c_proj.register_forward_pre_hook(keep(i)) for i, block in enumerate(model.transformer.h)]
    with torch.no_grad():
        corrupted_logits = model(corrupted_ids).logits[0, -1]
    for handle in handles:
        handle.remove()
    clean_logits = ref["logits"]
    a, f = answer["answer"]["id"], answer["foil"]["id"]
    # The foil is the corrupted prompt's prediction, or the prompt's second choice where the two agree.
    expected_foil = int(corrupted_logits.argmax())
    if expected_foil == int(clean_logits.argmax()):
        expected_foil = int(clean_logits.topk(2).indices[1])
    assert a == int(clean_logits.argmax()) and f == expected_foil != a
    assert abs(answer["clean"] - (clean_logits[a] - clean_logits[f]).item()) < 1e-5
    assert abs(answer["corrupted"] - (corrupted_logits[a] - corrupted_logits[f]).item()) < 1e-5
    for layer, head in [(0, 0), (0, 3), (1, 2)]:
        span = slice(head * head_dim, (head + 1) * head_dim)

        def patch(_m, args, layer=layer, span=span):
            x = args[0].clone()
            x[..., span] = kept[layer][..., span]
            return (x,)

        handle = model.transformer.h[layer].attn.c_proj.register_forward_pre_hook(patch)
        with torch.no_grad():
            logits = model(clean_ids).logits[0, -1]
        handle.remove()
        assert abs(answer["patched"][layer][head] - (logits[a] - logits[f]).item()) < 1e-5, (layer, head)
        expected = ((logits[a] - logits[f]).item() - answer["clean"]) / (answer["corrupted"] - answer["clean"])
        assert abs(answer["effect"][layer][head] - expected) < 1e-4
    # The stream entering block 1 at token 7 (where "John" and "Mary" differ), patched by a hook on transformers' block.
    corrupted_hidden = reference(gpt2_checkpoint, CORRUPTED)["hidden"]

    def stream(_m, args, kwargs):
        x = args[0].clone()
        x[:, 7] = corrupted_hidden[1][0, 7]
        return (x, *args[1:]), kwargs

    handle = model.transformer.h[1].register_forward_pre_hook(stream, with_kwargs=True)
    with torch.no_grad():
        logits = model(clean_ids).logits[0, -1]
    handle.remove()
    assert abs(answer["stream_patched"][1][7] - (logits[a] - logits[f]).item()) < 1e-5
    itself = lab.patching(str(gpt2_checkpoint), PROMPT, PROMPT)
    assert max(abs(v - itself["clean"]) for row in itself["patched"] for v in row) < 1e-5
    assert max(abs(v - itself["clean"]) for row in itself["stream_patched"] for v in row) < 1e-5
    assert max(abs(v) for row in itself["effect"] for v in row) < 1e-3


def test_patching_the_whole_stream_from_the_corrupted_prompt_gives_the_corrupted_logits(gpt2_checkpoint):
    """The stream entering any block, taken from the corrupted prompt at every token, is the corrupted run from there
    on: its logits are the corrupted prompt's."""
    import torch

    lab = recipe_module(RECIPE, "lab")
    loaded = lab.load(str(gpt2_checkpoint))
    model = loaded.model
    clean_ids, corrupted_ids = lab.tokenize(loaded, PROMPT), lab.tokenize(loaded, CORRUPTED)
    runs = {}
    for name, ids in (("clean", clean_ids), ("corrupted", corrupted_ids)):
        recorder = lab.Recorder(model)
        with torch.no_grad():
            runs[name] = (model(torch.tensor([ids]))[0, -1], recorder.streams)
        recorder.remove()
    every = [list(range(len(clean_ids)))]
    for layer in range(model.config.n_layer):
        with torch.no_grad():
            logits = lab.patch_streams(model, runs["clean"][1][layer][0], runs["corrupted"][1][layer][0], layer, every)
        assert (logits[0] - runs["corrupted"][0]).abs().max().item() < 1e-5, layer
        assert (logits[0] - runs["clean"][0]).abs().max().item() > 1e-3  # the prompts do differ


def test_patching_every_head_from_the_corrupted_prompt_gives_the_corrupted_logits(gpt2_checkpoint):
    """Every head of every block, taken from the corrupted prompt's run by the lab's own patching, gives the
    corrupted logits wherever the two prompts share their token, the last position (where patching reads its
    measure) among them: there the embeddings are the same, the heads write the corrupted values, and the MLPs
    and LayerNorms read that position's stream alone. Where the tokens differ ("John" and "Mary"), the clean
    embedding is still in the stream, and the logits are not the corrupted ones."""
    import torch

    lab = recipe_module(RECIPE, "lab")
    loaded = lab.load(str(gpt2_checkpoint))
    model = loaded.model
    clean_ids, corrupted_ids = lab.tokenize(loaded, PROMPT), lab.tokenize(loaded, CORRUPTED)
    heads = lab.HeadOutputs(model).keep()
    with torch.no_grad():
        corrupted = model(torch.tensor([corrupted_ids]))[0]  # (T, vocab)
    heads.remove()
    with torch.no_grad():
        clean = model(torch.tensor([clean_ids]))[0]
    every_head = {(layer, head): [0] for layer in range(model.config.n_layer) for head in range(model.config.n_head)}
    hooks = heads.write(every_head)
    try:
        with torch.no_grad():
            patched = model(torch.tensor([clean_ids]))[0]
    finally:
        hooks.remove()
    shared = [p for p, (a, b) in enumerate(zip(clean_ids, corrupted_ids, strict=True)) if a == b]
    differ = [p for p in range(len(clean_ids)) if p not in shared]
    assert differ and shared[-1] == len(clean_ids) - 1
    assert (patched[shared] - corrupted[shared]).abs().max().item() < 1e-5
    assert (clean[-1] - corrupted[-1]).abs().max().item() > 1e-3  # the last position's logits did move
    for position in differ:
        assert (patched[position] - corrupted[position]).abs().max().item() > 1e-3, position


def model_head_dim(model) -> int:
    return model.config.n_embd // model.config.n_head


# ---- through the API


def test_the_three_endpoints_answer_and_refuse_in_words(gpt2_app):
    client = gpt2_app.test_client()
    trace = client.post(URL.format("trace"), json={"prompt": PROMPT})
    assert trace.status_code == 200, trace.get_json()
    body = json.loads(trace.data)  # strict: no NaN anywhere
    assert body["kind"] == "trace" and len(body["tokens"]) == len(body["attention"][0][0])
    size = {k: body["checkpoint"][k] for k in ("layers", "heads", "width", "positions", "weights")}
    assert size == {"layers": 2, "heads": 4, "width": 32, "positions": 64, "weights": "model.safetensors"}
    generated = client.post(URL.format("generations"), json={"prompt": PROMPT, "steps": 3, "strategy": "sample"})
    assert generated.status_code == 200 and len(generated.get_json()["steps"]) == 3
    patched = client.post(URL.format("patching"), json={"prompt": PROMPT, "corrupted": CORRUPTED})
    assert patched.status_code == 200 and len(patched.get_json()["effect"]) == 2
    for endpoint, request, message in [
        ("patching", {"prompt": PROMPT, "corrupted": "Mary"}, "corrupted: becomes 2 tokens; the prompt becomes 14"),
        ("trace", {"prompt": "one two three four five six seven eight nine ten, " * 6}, "prompt: becomes "),
        ("generations", {"prompt": PROMPT, "steps": 0}, "steps: 0 is out of range"),
        ("trace", {"prompt": PROMPT, "layer": 1}, "layer: unknown field"),
    ]:
        refused = client.post(URL.format(endpoint), json=request)
        assert refused.status_code == 400, (endpoint, refused.get_json())
        assert refused.get_json()["error"]["message"].startswith(message), refused.get_json()
    long = client.post(URL.format("trace"), json={"prompt": "one two three four five six seven eight nine ten, " * 6})
    assert long.get_json()["error"]["message"].endswith("tokens; at most 48 fit")


def test_what_if_zeroing_a_head_runs_on_a_trace(gpt2_app):
    client = gpt2_app.test_client()
    answer = client.post("/api/models/gpt2/interventions", json={
        "endpoint": "trace", "request": {"prompt": PROMPT},
        "interventions": [{"node": "h.1.attn", "head": 2, "action": "zero"}]})
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert body["after"]["top"] != body["before"]["top"] and body["effects"]["h.1.attn"] > 0


def test_without_a_checkpoint_the_page_and_the_api_say_how_to_provide_one(make_app, tmp_path):
    app = make_app(type("Bare", (TestConfig,), {"CHECKPOINTS_DIR": str(tmp_path)}))  # not even the project's own
    client = app.test_client()
    response = client.post(URL.format("trace"), json={"prompt": PROMPT})
    assert response.status_code == 503
    message = response.get_json()["error"]["message"]
    assert message.startswith("No GPT-2 checkpoint is on this server. Run `make checkpoints`: it writes TensorViz's "
                              "digit-sorting GPT (the gpt recipe) in GPT-2's layout, not OpenAI's GPT-2 from the "
                              "project's gpt recipe where TensorViz looks")
    assert "`hf download openai-community/gpt2 config.json tokenizer.json" in message
    assert "TENSORVIZ_GPT2_CHECKPOINT" in message
    html = client.get("/models/gpt2").get_data(as_text=True)
    assert "No checkpoint to trace yet." in html and 'id="graph-stage"' in html
    assert client.get("/api/models/gpt2").status_code == 200


def test_recorded_with_a_checkpoint_the_cases_verify_on_it(make_app, tmp_path, gpt2_checkpoint):
    from .conftest import ModelTree

    (tmp_path / "tree").mkdir()
    tree = ModelTree(tmp_path / "tree")
    shutil.copytree(RECIPE, tree.recipes / "gpt2", ignore=shutil.ignore_patterns("__pycache__"))
    app = make_app(type("C", (TestConfig,), tree.config(GPT2_CHECKPOINT=str(gpt2_checkpoint),
                                                          CATALOG_RELOAD_SECONDS=0.01)))
    result = app.test_cli_runner().invoke(args=["record", "gpt2"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tree.manifests / "gpt2" / "manifest.json").read_text())
    assert [c["id"] for c in manifest["experiment"]["cases"]] == ["pi", "repeats", "falling"]
    result = app.test_cli_runner().invoke(args=["verify", "gpt2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # the catalog's reload may log to stderr meanwhile
    assert report["status"] == "passed" and report["checkpoint"]["matches_recording"] is True
    assert len(report["checks"]) == 5 and all(c["status"] == "passed" for c in report["checks"])


def test_the_stored_recording_is_the_projects_own_checkpoint_and_current(runner, made_checkpoint):
    """Recorded with what a fresh machine has: the gpt recipe written in GPT-2's layout (`make checkpoints`)."""
    result = runner.invoke(args=["record", "gpt2", "--check"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((PROJECT_ROOT / "manifests" / "gpt2" / "manifest.json").read_text())
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    assert ["h.0", "h.1"] == [i for i, layer in layers.items() if layer["parent"] == "h"]
    assert [c["id"] for c in manifest["experiment"]["cases"]] == ["pi", "repeats", "falling"]
    made = tomllib.loads((RECIPE / "recipe.toml").read_text())["checkpoint"]["made"]
    assert manifest["provenance"]["checkpoint"]["files"] == made["sha256"]


def test_the_projects_own_checkpoint_is_the_gpt_recipe_and_gpt2_lm_head_model_computes_it(make_app, tmp_path):
    """`flask checkpoints gpt2` writes the gpt recipe in GPT-2's layout, the same bytes as declared; transformers'
    GPT2LMHeadModel reads it and computes the recipe's own logits (minGPT's test against a reference)."""
    import torch
    import transformers

    app = make_app(type("Made", (TestConfig,), {"CHECKPOINTS_DIR": str(tmp_path)}))
    result = app.test_cli_runner().invoke(args=["checkpoints", "gpt2"])
    assert result.exit_code == 0, result.output
    assert "written into" in result.output and "sha256 checked" in result.output
    again = app.test_cli_runner().invoke(args=["checkpoints", "gpt2"])  # a second run checks, writes nothing
    assert "already in" in again.output
    folder = tmp_path / "sorting-gpt"
    gpt = recipe_module(PROJECT_ROOT / "recipes" / "gpt", "model")
    ids = torch.tensor([[3, 1, 4, 1, 10]])  # "3 1 4 1 ="
    with torch.no_grad():
        ours = gpt.build_model()(ids)
        theirs = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()(ids).logits
    assert (ours - theirs).abs().max().item() < 1e-5


def test_the_datalab_traces_generates_and_patches_on_the_projects_own_checkpoint(made_checkpoint, client):
    """A fresh machine's GPT-2 DataLab: the sorter read through GPT-2's layout, recognised by its weights' sha256 and
    said to be what it is; a word its vocabulary cannot spell is refused in words."""
    traced = client.post(URL.format("trace"), json={"prompt": "3 1 4 1 ="}).get_json()
    assert traced["prediction"]["text"] == "1" and traced["prediction"]["probability"] > 0.99
    assert traced["checkpoint"]["layers"] == 2 and traced["checkpoint"]["vocab"] == 11
    assert traced["checkpoint"]["probe"]["looks_untrained"] is False
    assert traced["checkpoint_recognised"] == \
        "TensorViz's digit-sorting GPT (the gpt recipe) in GPT-2's layout, not OpenAI's GPT-2"
    generated = client.post(URL.format("generations"), json={"prompt": "3 1 4 1 =", "steps": 3}).get_json()
    assert [step["text"] for step in generated["steps"]] == ["1", "1", "3"] and generated["text"] == "3 1 4 1 = 1 1 3"
    patched = client.post(URL.format("patching"), json={"prompt": "3 1 4 1 =", "corrupted": "3 5 4 6 ="})
    assert patched.status_code == 200, patched.get_json()
    assert patched.get_json()["answer"]["text"] == "1" and patched.get_json()["foil"]["text"] == "3"
    refused = client.post(URL.format("trace"), json={"prompt": PROMPT})
    assert refused.status_code == 400
    assert refused.get_json()["error"]["message"].startswith("prompt: holds what this checkpoint's vocabulary cannot "
                                                             "spell")
    page = client.get("/models/gpt2").get_data(as_text=True)
    assert "Weights recognised by their sha256: TensorViz&#39;s digit-sorting GPT" in page


def test_random_weights_are_called_untrained_and_not_recognised(gpt2_app):
    answer = gpt2_app.test_client().post(URL.format("trace"), json={"prompt": PROMPT}).get_json()
    probe = answer["checkpoint"]["probe"]
    assert probe["looks_untrained"] is True and probe["measured"] > 0.9
    assert probe["note"].startswith("These weights look untrained (the next token's entropy after the probe prompts")
    assert answer["checkpoint_recognised"] is None and answer["checkpoint_note"].startswith("Weights not recognised")
    page = gpt2_app.test_client().get("/models/gpt2").get_data(as_text=True)
    assert "Weights not recognised (their sha256 is none this server knows): this may be an untrained model" in page
