"""Replay the recorded cases of the trained tiny BERT, each beside its causal twin, and the four checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, the recipe kit (recipekit: the case, the replay), model.py and train.py beside this file.
"""

import json
import sys
from functools import partial

import torch

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import metric, vector
from recipekit.masked_lm import CaseInputs, run_case, unpack
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import CAUSAL_WEIGHTS, MASK, WEIGHTS, WORDS, TinyBert, build_model, causal_twin
from .train import ID, IS_NEXT, NOT_NEXT, SEGMENTS, accuracy, held_out, pair


def masked(text: str, label: int) -> CaseInputs:
    """A case from its words, a masked word written as [MASK:word] (the word is what the loss scores)."""
    original, corrupted, selected = [], [], []
    for position, word in enumerate(text.split()):
        if word.startswith("[MASK:"):
            word = word[len("[MASK:") : -1]
            selected.append(position)
        original.append(ID[word])
        corrupted.append(MASK if position in selected else ID[word])
    return CaseInputs(corrupted, original, SEGMENTS, selected, label)


# Each on a held-out sentence (old dog, young cat, big bird: never trained on).
CASES = {
    "determiner": masked("[CLS] [MASK:two] old dogs bark [SEP] they bark loudly [SEP]", IS_NEXT),
    "noun": masked("[CLS] a young [MASK:cat] meows [SEP] it meows softly [SEP]", IS_NEXT),
    "verb": masked("[CLS] a big bird [MASK:sings] [SEP] it sings sweetly [SEP]", IS_NEXT),
    "pronoun": masked("[CLS] two old dogs bark [SEP] [MASK:it] meows softly [SEP]", NOT_NEXT),
    "two-masks": masked("[CLS] two big [MASK:birds] [MASK:sing] [SEP] they sing sweetly [SEP]", IS_NEXT),
}


def named(case: dict) -> dict:
    """The case with its token vectors' entries named by the language's words."""
    for item in case["vectors"]:
        if item["key"].startswith(("first_mask_", "probabilities_at_", "twin_")):
            item["names"] = list(WORDS)
    return case


@torch.no_grad()
def beside_twin(model: TinyBert, twin: TinyBert, case: CaseInputs) -> dict:
    """The case on the model, with what the causal twin answers first: each masked word's probability under
    both, and the twin's whole distribution at the first masked position."""
    found = run_case(model, case)
    twin_probs = unpack(
        twin(torch.tensor([case.input_ids]), torch.tensor([case.segment_ids]), causal=True), len(case.input_ids)
    )[0][0].softmax(-1)  # (T, vocab)
    probs = {v["key"]: v["values"] for v in found["vectors"]}
    outcome = []
    for position in case.selected:
        word = case.original_ids[position]
        outcome += [
            metric(
                f"right_{position}",
                f"Probability of “{WORDS[word]}” at position {position}",
                probs[f"probabilities_at_{position}"][word],
            ),
            metric(
                f"twin_right_{position}",
                f"The causal twin's probability of “{WORDS[word]}” there",
                twin_probs[position, word].item(),
            ),
        ]
    first = min(case.selected)
    found["vectors"].append(
        vector(
            "twin_first_mask_probabilities",
            f"The causal twin's prediction at position {first}",
            twin_probs[first],
        )
    )
    found["metrics"] = outcome + found["metrics"]
    return named(found)


@torch.no_grad()
def held_out_case(model: TinyBert, twin: TinyBert) -> dict:
    """The held-out sentence pairs: each model's share of masked words and of pairs right, and the training
    curves train.py stored."""
    pairs = held_out()
    mine, theirs = accuracy(model, pairs, causal=False), accuracy(twin, pairs, causal=True)
    curves = {path: stored.read(path)[1] for path in (WEIGHTS, CAUSAL_WEIGHTS)}
    return {
        "label": f"{len(pairs)} held-out sentence pairs, never trained on",
        "vectors": [
            vector(
                "accuracy_per_epoch",
                "Held-out words right after each epoch (bidirectional)",
                json.loads(curves[WEIGHTS]["accuracy_per_epoch"]),
                first=1,
            ),
            vector(
                "twin_accuracy_per_epoch",
                "Held-out words right after each epoch (the causal twin)",
                json.loads(curves[CAUSAL_WEIGHTS]["accuracy_per_epoch"]),
                first=1,
            ),
            vector(
                "training_loss",
                "Mean training loss in each epoch (bidirectional)",
                json.loads(curves[WEIGHTS]["loss_per_epoch"]),
                first=1,
            ),
        ],
        "metrics": [
            metric("accuracy", "Masked words right, each masked alone (bidirectional)", mine["accuracy"]),
            metric("twin_accuracy", "Masked words right (the causal twin)", theirs["accuracy"]),
            metric("nsp_accuracy", "Sentence pairs right (bidirectional)", mine["nsp_accuracy"]),
            metric("twin_nsp_accuracy", "Sentence pairs right (the causal twin)", theirs["nsp_accuracy"]),
            metric("held_out_pairs", "Held-out sentence pairs", len(pairs)),
        ],
    }


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_ACCURACY = "The stored weights reproduce the held-out accuracy measured when they were trained"
CHECK_LATER_WORD = (
    "A later word decides an earlier [MASK]: the model reads each held-out determiner from the noun "
    "after it, which its causal twin cannot see"
)
CHECK_TWIN_CAUSAL = "The causal twin never reads a later word: changing the last word moves no earlier logit"
CHECK_TIED_DECODER = "The masked-word decoder shares the token-embedding weight"
CHANGED = 1e-4  # an earlier logit moving by more than this counts as influenced
UNCHANGED = 1e-7  # and by no more than this as untouched
GUESS = 0.75  # the twin, guessing a determiner between two, is right about half the time: never this often


@torch.no_grad()
def check_accuracy(model: TinyBert) -> dict:
    return kit.reproduced(
        accuracy(model, held_out(), causal=False)["accuracy"],
        float(stored.read(WEIGHTS)[1].get("accuracy", "nan")),
        0,
        kit.COUNTED,
    )


@torch.no_grad()
def check_later_word(model: TinyBert) -> dict:
    """Every held-out sentence with its determiner masked: the share each model fills in right."""

    def right(m: TinyBert, causal: bool) -> float:
        pairs = [p for p in held_out() if p.label == IS_NEXT]
        inputs = torch.tensor([[MASK if i == 1 else t for i, t in enumerate(p.ids)] for p in pairs])
        logits = unpack(m(inputs, torch.tensor(SEGMENTS).expand_as(inputs), causal=causal), inputs.size(1))[0]
        return (logits[:, 1].argmax(-1) == torch.tensor([p.ids[1] for p in pairs])).float().mean().item()

    mine, twin = right(model, False), right(causal_twin(), True)
    return {"passed": mine == 1.0 and twin < GUESS, "detail": {"bidirectional_right": mine, "causal_twin_right": twin}}


@torch.no_grad()
def check_twin_causal(model: TinyBert) -> dict:
    """The last word of a held-out pair changed: how far every earlier position's logits move, in the twin (run
    causally) and in the model."""
    ids = list(pair(1, "old", 0, 1, 0).ids)
    later = [*ids[:-2], ID["softly"], ids[-1]]  # "they bark loudly" becomes "they bark softly"

    def shift(m: TinyBert, causal: bool) -> float:
        before, after = (
            unpack(m(torch.tensor([x]), torch.tensor([SEGMENTS]), causal=causal), len(x))[0] for x in (ids, later)
        )
        return (after[0, :-2] - before[0, :-2]).abs().max().item()

    twin, bidirectional = shift(causal_twin(), True), shift(model, False)
    return {
        "passed": twin <= UNCHANGED and bidirectional > CHANGED,
        "detail": {"causal_twin_max_shift": twin, "bidirectional_max_shift": bidirectional},
    }


def check_tied_decoder(model: TinyBert) -> dict:
    shared = model.mlm_decoder.weight.data_ptr() == model.word_embeddings.weight.data_ptr()
    return {"passed": shared, "detail": {"shares_storage": shared}}


CHECKS = {
    CHECK_ACCURACY: check_accuracy,
    CHECK_LATER_WORD: check_later_word,
    CHECK_TWIN_CAUSAL: check_twin_causal,
    CHECK_TIED_DECODER: check_tied_decoder,
}


def replay(model: TinyBert | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given (the causal twin is always the stored one)."""
    model = model if model is not None else build_model()
    twin = causal_twin()
    cases = {case_id: partial(beside_twin, model, twin, spec) for case_id, spec in CASES.items()}
    cases["held-out"] = partial(held_out_case, model, twin)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
