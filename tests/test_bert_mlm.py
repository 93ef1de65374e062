"""The trained tiny BERT: against transformers' BertForPreTraining, its language (one right answer per masked
word), what it and its causal twin fill in, its checks, its training and its lab."""

import json

import pytest
import torch

from app.services.config import PROJECT_ROOT
from recipekit import training
from recipekit import weights as stored

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "bert-mlm"
MANIFEST = PROJECT_ROOT / "manifests" / "bert-mlm" / "manifest.json"
bert = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")


@pytest.fixture(scope="module")
def model():
    return bert.build_model()


def hf_bert(model):
    """transformers' BertForPreTraining with the recipe's weights, module by module."""
    transformers = pytest.importorskip("transformers")
    c = bert.BertConfig()
    config = transformers.BertConfig(vocab_size=c.vocab_size, hidden_size=c.width, num_hidden_layers=1,
                                     num_attention_heads=c.heads, intermediate_size=c.ffn, hidden_act="gelu",
                                     max_position_embeddings=c.max_length, type_vocab_size=c.segments,
                                     layer_norm_eps=c.layer_norm_epsilon, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    reference = transformers.BertForPreTraining(config).eval()
    names = {"word_embeddings": "bert.embeddings.word_embeddings", "position_embeddings":
             "bert.embeddings.position_embeddings", "segment_embeddings": "bert.embeddings.token_type_embeddings",
             "embedding_norm": "bert.embeddings.LayerNorm", "encoder.attention.query":
             "bert.encoder.layer.0.attention.self.query", "encoder.attention.key":
             "bert.encoder.layer.0.attention.self.key", "encoder.attention.value":
             "bert.encoder.layer.0.attention.self.value", "encoder.attention.project":
             "bert.encoder.layer.0.attention.output.dense", "encoder.attention_norm":
             "bert.encoder.layer.0.attention.output.LayerNorm", "encoder.up": "bert.encoder.layer.0.intermediate.dense",
             "encoder.down": "bert.encoder.layer.0.output.dense", "encoder.output_norm":
             "bert.encoder.layer.0.output.LayerNorm", "mlm_transform": "cls.predictions.transform.dense",
             "mlm_norm": "cls.predictions.transform.LayerNorm", "mlm_decoder": "cls.predictions.decoder",
             "pooler": "bert.pooler.dense", "nsp_head": "cls.seq_relationship"}
    theirs = {}
    for name, value in model.state_dict().items():
        module, _, kind = name.rpartition(".")
        theirs[f"{names[module]}.{kind}"] = value
    theirs["cls.predictions.bias"] = model.mlm_decoder.bias.detach()
    missing, unexpected = reference.load_state_dict(theirs, strict=False)
    assert not unexpected and set(missing) <= {"bert.embeddings.position_ids"}, (missing, unexpected)
    return reference


def test_the_model_equals_transformers_bert_for_pretraining(model):
    reference = hf_bert(model)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, len(bert.WORDS), (4, bert.LENGTH), generator=generator)
    segments = torch.tensor(train.SEGMENTS).expand_as(ids)
    with torch.no_grad():
        ours = model(ids, segments)
        theirs = reference(input_ids=ids, token_type_ids=segments)
    mlm_logits = ours[:, :-2].unflatten(1, (bert.LENGTH, -1))  # (B, T, vocab)
    torch.testing.assert_close(mlm_logits, theirs.prediction_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours[:, -2:], theirs.seq_relationship_logits, rtol=0, atol=1e-5)


def test_every_answered_word_has_one_right_answer_and_the_adjective_four():
    """In the language, each word but the adjective is the only one that fits the rest of its pair."""
    pairs = train.pairs()
    assert len(pairs) == 120 and sum(p.label == train.IS_NEXT for p in pairs) == 24
    language = {(p.ids, p.label) for p in pairs}
    for p in pairs:
        for position in range(1, bert.LENGTH - 1):
            fits = {w for w in range(len(bert.WORDS))
                    if (p.ids[:position] + (w,) + p.ids[position + 1:], p.label) in language}
            if position in train.ANSWERED:
                assert fits == {p.ids[position]}, (p, position)
            elif p.ids[position] != bert.SEP:
                assert len(fits) == len(train.ADJECTIVES), (p, position)


def test_no_held_out_sentence_is_trained_on_and_the_corruption_touches_answered_words_alone():
    is_next, not_next = train.training_pairs()
    held = train.held_out()
    assert len(held) == 30 and not {p.ids for p in held} & {p.ids for p in is_next + not_next}
    generator = torch.Generator().manual_seed(0)
    for p in is_next[:20]:
        corrupted, selected = train.corrupt(p.ids, generator)
        assert 1 <= len(selected) <= 2 and set(selected) <= set(train.ANSWERED)
        assert all(c == t for i, (c, t) in enumerate(zip(corrupted, p.ids, strict=True)) if i not in selected)


def test_the_model_fills_every_held_out_word_and_its_causal_twin_cannot(model):
    held = train.held_out()
    mine = train.accuracy(model, held, causal=False)
    twin = train.accuracy(bert.causal_twin(), held, causal=True)
    assert mine == {"accuracy": 1.0, "nsp_accuracy": 1.0}
    assert twin["accuracy"] < 0.75 and twin["nsp_accuracy"] < 0.75
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    for case_id in ("determiner", "noun", "pronoun"):  # decided by a later word: the twin guesses
        metrics = {m["key"]: m["value"] for m in cases[case_id]["metrics"]}
        position = recipe.CASES[case_id].selected[0]
        assert metrics[f"right_{position}"] > 0.95 and metrics[f"twin_right_{position}"] < 0.5, case_id
    verb = {m["key"]: m["value"] for m in cases["verb"]["metrics"]}
    assert verb["right_4"] > 0.95 and verb["twin_right_4"] > 0.95  # decided by the words before it: both know


def test_checks_pass_on_the_recipe(model):
    assert all(check["passed"] for check in recipe.replay(model)["checks"])


def test_the_checks_catch_an_untrained_model_and_an_untied_decoder():
    torch.manual_seed(0)
    untrained = bert.TinyBert(bert.BertConfig()).eval()
    assert not recipe.check_accuracy(untrained)["passed"]
    assert not recipe.check_later_word(untrained)["passed"]
    untrained.mlm_decoder.weight = torch.nn.Parameter(untrained.word_embeddings.weight.detach().clone())
    assert not recipe.check_tied_decoder(untrained)["passed"]


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(request, monkeypatch, capsys):
    """`train.py --check` with the stored weights standing in for the two trainings (which take 20 s: README)."""
    def fitted(path, changed=False):
        model = bert.load(path)
        if changed:
            with torch.no_grad():
                model.nsp_head.bias[0] += 0.01
        metadata = stored.read(path)[1]
        return training.Fitted(model, json.loads(metadata["loss_per_epoch"]), [
            {"accuracy": float(metadata["accuracy"]), "nsp_accuracy": float(metadata["nsp_accuracy"])}])

    def check(changed: bool) -> int:
        made = {False: fitted(bert.WEIGHTS), True: fitted(bert.CAUSAL_WEIGHTS, changed)}
        monkeypatch.setattr(train, "train", lambda causal: made[causal])
        return train.main(["--check"])

    deterministic = torch.are_deterministic_algorithms_enabled()
    request.addfinalizer(lambda: torch.use_deterministic_algorithms(deterministic))  # main() turns it on
    monkeypatch.setattr(training, "trained_here", lambda made: True)  # as on the machine that trained them
    assert check(changed=False) == 0
    assert check(changed=True) == 1
    assert "largest weight difference 1.00e-02 (causal.safetensors: nsp_head.bias)" in capsys.readouterr().out


# ---- the lab

DETERMINER = recipe.CASES["determiner"]


def run_request(attention: str) -> dict:
    return {"input_ids": DETERMINER.input_ids, "original_ids": DETERMINER.original_ids,
            "mlm_positions": DETERMINER.selected, "attention": attention}


def test_a_causal_run_reads_the_twin_and_a_bidirectional_one_sets_it_beside(module_client):
    both = module_client.post("/api/models/bert-mlm/runs", json=run_request("bidirectional")).get_json()["case"]
    causal = module_client.post("/api/models/bert-mlm/runs", json=run_request("causal")).get_json()["case"]
    metrics = {m["key"]: m["value"] for m in both["metrics"]}
    twin_first = next(v["values"] for v in causal["vectors"] if v["key"] == "first_mask_probabilities")
    assert metrics["twin_right_1"] == pytest.approx(twin_first[DETERMINER.original_ids[1]], abs=1e-6)
    assert metrics["right_1"] > 0.95 and causal["label"] == "Live run · causal attention"
    heads = [m["values"] for m in causal["matrices"] if m["key"].startswith("attention_head_")]
    assert all(row[j] == 0 for head in heads for i, row in enumerate(head) for j in range(i + 1, len(row)))


def test_the_trace_follows_the_twin_under_causal_attention(module_client):
    url = "/api/models/bert-mlm/trace?input_ids=" + ",".join(map(str, DETERMINER.input_ids))
    mine = module_client.get(url).get_json()
    twin = module_client.get(url + "&attention=causal").get_json()
    predicted = {answer["attention"]: next(s for s in answer["stages"] if s["id"] == "softmax")["predicted"]
                 for answer in (mine, twin)}
    assert predicted["bidirectional"] == bert.WORDS.index("two")
    attention = next(s for s in twin["stages"] if s["id"] == "attention")
    assert all(head["masked"] == list(range(2, bert.LENGTH)) for head in attention["heads"])  # [MASK] at 1
