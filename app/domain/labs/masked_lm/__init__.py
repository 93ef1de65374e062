"""The masked-LM lab kind (an encoder trained to fill in masked tokens, with a sentence-pair head):
what-if runs, the pretraining corruption sampler, and a stage-by-stage trace of one token."""

import math

from ...numbers import in_prose
from ..cases import attention_axes, input_tokens, metrics, vectors
from ..fields import fail
from ..kind import LabKind, Reads
from .shapes import Corruption, MaskedTrace


def held_out_pairs(scores: dict, spec) -> str | None:
    """The held-out pairs' score: the masked tokens filled in right, and the causal twin's beside it where trained."""
    if "accuracy" not in scores or "held_out_pairs" not in scores:
        return None
    pairs = int(scores["held_out_pairs"])
    sentence = f"Right on {100 * scores['accuracy']:.0f}% of the masked tokens of {pairs} held-out sentence pairs"
    twin = scores.get("twin_accuracy")
    causal = spec.words.get("causal")
    return f"{sentence}; {causal}, {100 * twin:.0f}%." if twin is not None and causal else f"{sentence}."


NSP = ("IsNext", "NotNext")  # the sentence-pair head's answers, in its order (the second sentence follows, or not)


def default_segments(input_ids: list[int], spec) -> list[int]:
    """Segment A up to and including the first SEP, segment B after it."""
    sep = spec.special["SEP"]
    first = input_ids.index(sep) if sep in input_ids else len(input_ids) - 1
    return [0 if i <= first else min(1, spec.sizes["segments"] - 1) for i in range(len(input_ids))]


class MaskedLM(LabKind):
    name = "masked-lm"
    token_vectors = ("input_ids", "original_ids")
    requires = {"sizes": ("length", "vocab", "segments"), "special": ("CLS", "SEP", "MASK"),
                "endpoints": ("runs", "corruptions", "trace")}
    reads = {
        "runs": Reads(items=("probabilities", "probabilities_at_*", "nsp_probabilities", "attention_head_*")),
        "corruptions": Reads(keys=("run_request", "positions")),
        "trace": Reads(keys=("position", "attention", "stages"),
                       stages=("tokens", "embeddings", "embedding_norm", "attention", "attention_output", "ffn_up",
                               "ffn_down", "mlm_head", "logits", "softmax", "nsp")),
    }
    results = {"corruptions": Corruption, "trace": MaskedTrace}
    limits = {"trace": {"position": "Required when input_ids holds no MASK; the first MASK's position when absent."}}

    def prepare(self, endpoint: str, args: dict, spec) -> dict:
        """Defaults that depend on other fields: segments from the first SEP, a trace's position from MASK."""
        if "segment_ids" not in args and "input_ids" in args:
            args["segment_ids"] = default_segments(args["input_ids"], spec)
        if endpoint == "trace" and "position" not in args:
            mask = spec.special["MASK"]
            if mask not in args["input_ids"]:
                fail("position", f"is required when input_ids holds no MASK ({mask})")
            args["position"] = args["input_ids"].index(mask)
        return args

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the run request that replays it. The recording keeps no sentence-pair
        label; the one whose cross entropy, -log p(label), equals the recorded loss is it."""
        presets = []
        for case in cases:
            found, scores = vectors(case), metrics(case)
            if not {"input_ids", "original_ids", "mlm_positions", "nsp_probabilities"} <= set(found) \
                    or "nsp_loss" not in scores:
                continue
            probs = found["nsp_probabilities"]
            label = min(range(len(probs)),
                        key=lambda i: abs(-math.log(max(probs[i], 1e-300)) - scores["nsp_loss"]))
            presets.append({"id": case["id"], "label": case["label"], "request": {
                "input_ids": found["input_ids"],
                "segment_ids": default_segments(found["input_ids"], spec),
                "mlm_positions": [i for i, flag in enumerate(found["mlm_positions"]) if flag],
                "original_ids": found["original_ids"],
                "nsp_label": label,
                "attention": "bidirectional",
            }})
        return presets

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """Attention maps run over the (corrupted) input tokens, queries down and keys across."""
        tokens = input_tokens(case, spec)
        if tokens is None:
            return {}
        return {m["key"]: attention_axes(tokens, tokens) for m in case.get("matrices", [])
                if m["key"].startswith("attention") and len(m["values"]) == len(tokens)}

    def example(self, endpoint: str, presets: list[dict], spec) -> dict | None:
        """The first preset's request; a corruption draw with seed 0."""
        request = super().example(endpoint, presets, spec)
        return request if request is None or endpoint != "corruptions" else request | {"seed": 0}

    def vector_names(self, case: dict, spec) -> dict[str, list[str]]:
        """The sentence-pair head's two answers by name, beside the tokens and the vocabulary (LabKind's)."""
        found = super().vector_names(case, spec)
        if len(vectors(case).get("nsp_probabilities", [])) == len(NSP):
            found["nsp_probabilities"] = list(NSP)
        return found

    def outcome(self, case: dict, spec) -> str | None:
        """“Filled in “two” (probability 0.99): right; read the second sentence as following the first (0.99)”."""
        found, scores = vectors(case), metrics(case)
        ids = found.get("input_ids")
        if ids is None:
            return held_out_pairs(scores, spec)
        mask, original = spec.special["MASK"], found.get("original_ids")
        filled = []
        for k, position in enumerate(i for i, token in enumerate(ids) if token == mask):
            first = found.get("first_mask_probabilities") if not k else None
            probs = found.get(f"probabilities_at_{position}") or first
            if not probs:
                continue
            best = max(range(len(probs)), key=probs.__getitem__)
            part = f"“{spec.token_name(best)}” (probability {in_prose(probs[best], 2)})"
            if original is not None and original[position] != mask:
                right = original[position] == best
                part += ": right" if right else f": wrong, it was “{spec.token_name(original[position])}”"
            filled.append(part)
        parts = [f"filled in {'; '.join(filled)}"] if filled else []
        pair = found.get("nsp_probabilities")
        if pair and len(pair) == 2:
            follows = pair[0] >= pair[1]
            parts.append(f"read the second sentence as {'following' if follows else 'not following'} the first "
                         f"(probability {in_prose(max(pair), 2)})")
        if not parts:
            return None
        sentence = "; ".join(parts)
        return f"{sentence[0].upper()}{sentence[1:]}."


KIND = MaskedLM()
