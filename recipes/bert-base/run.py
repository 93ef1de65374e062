"""Replay: the recorded DataLab cases on the server's checkpoint, and checks of how BERT computes.

    python run.py /path/to/checkpoint     # the cases and checks on that checkpoint
    python run.py                         # the checks alone, on random weights of BERT-base's shape

Without a checkpoint there is nothing trained to record: the checks still hold for any weights.
"""

import sys

import torch

from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .lab import datalab, load, trace
from .model import Bert, build_model


class Case:
    """A recorded case: a sentence for the MLM head (with [MASK]s), the same sentence whole for an encoder, and a
    second sentence to compare it with."""

    def __init__(self, masked: str, whole: str, other: str) -> None:
        self.masked, self.whole, self.other = masked, whole, other

    def request(self, mlm: bool) -> dict:
        return {"text": self.masked if mlm else self.whole, "top_k": TOP, "other": self.other}


CASES = {
    "capital": Case(
        "The capital of France is [MASK].", "The capital of France is Paris.", "Paris is the largest city of France."
    ),
    # One word, two meanings: the river's bank beside the bank that keeps money.
    "river": Case(
        "She sat on the bank of the [MASK] and watched the boats.",
        "She sat on the bank of the river and watched the boats.",
        "He paid the money into his account at the bank.",
    ),
    "two-masks": Case(
        "The [MASK] chased the cat up the [MASK].", "The dog chased the cat up the tree.", "A puppy ran after a kitten."
    ),
}
TOP = 10  # predictions recorded per case
CHECK_IDS = [101, 1996, 3007, 1997, 2605, 2003, 103, 1012, 102]  # a 9-token sequence for the weight-free checks
CHECK_OTHER = [101, 3000, 2003, 1037, 2103, 1012, 102]


def case(answer: dict) -> dict:
    """A DataLab answer as recorded vectors, matrices and metrics."""
    layers = answer["layers"]
    vectors = [
        vector("input_ids", "Token ids", [t["id"] for t in answer["tokens"]]),
        vector("embedding", "Embedding of the traced token after LayerNorm", answer["embedding"]["norm"]),
        vector("final_state", "Final state of the traced token", layers[-1]["state"]),
        vector(
            "text_shares",
            "Each token's share of the similarity to the second sentence",
            answer["similarity"]["text_shares"],
        ),
    ]
    metrics = [metric("similarity", "Cosine similarity to the second sentence", answer["similarity"]["cosine"])]
    if "prediction" in answer:  # the MLM head's stages
        vectors += [
            vector("top_ids", f"Top {TOP} predicted token ids", [t["id"] for t in answer["top"]]),
            vector("top_probabilities", f"Top {TOP} probabilities", [t["probability"] for t in answer["top"]]),
            vector("top_logits", f"Top {TOP} logits", [t["logit"] for t in answer["top"]]),
            vector(
                "lens_probability",
                "Probability of the prediction after each layer (logit lens)",
                [layer["lens"]["probability"] for layer in layers],
            ),
            vector(
                "lens_cosine",
                "Cosine of each layer's state to the final state",
                [layer["lens"]["cosine"] for layer in layers],
            ),
        ]
        metrics += [
            metric("prediction_id", "Predicted token id", answer["prediction"]["id"]),
            metric("confidence", "Probability of the prediction", answer["prediction"]["probability"]),
            metric("denominator", "Softmax denominator (after the max shift)", answer["softmax"]["denominator"]),
        ]
    else:
        vectors.append(
            vector(
                "sentence_embedding",
                "The sentence's embedding (mean pooling, length one)",
                answer["sentence"]["embedding"],
            )
        )
    return {
        "vectors": vectors,
        "matrices": [
            matrix(
                "attention_last",
                "Last layer: every head's attention from the traced token",
                layers[-1]["attention"]["heads"],
                rows=[f"head {h + 1}" for h in range(len(layers[-1]["attention"]["heads"]))],
                columns=[f"{t['index']}:{t['token']}" for t in answer["tokens"]],
            ),
            matrix(
                "ffn_last",
                "Last layer: the FFN's units before and after GELU",
                [layers[-1]["ffn"]["before"], layers[-1]["ffn"]["after"]],
                rows=["before GELU", "after GELU"],
            ),
        ],
        "metrics": metrics,
    }


@torch.no_grad()
def forward_difference(model: Bert, ids: list[int], answer: dict) -> float:
    """How far the trace's logits, or its sentence embedding, are from the model's own forward."""
    out = model(torch.tensor([ids]))
    if "top" in answer:
        logits = out[0, answer["position"]]  # (vocab,)
        return max(abs(logits[t["id"]].item() - t["logit"]) for t in answer["top"])
    return (out[0] - torch.tensor(answer["sentence"]["embedding"])).abs().max().item()


def checks(answers: list[tuple[list[int], dict]], model: Bert) -> list[dict]:
    """What holds for any weights, under the same four names with or without the MLM head (a recording made with one
    checkpoint is replayed with another): the trace is the model's forward, attention sums to one, the tokens'
    shares of a similarity sum to it, and the head reads out by its rule."""

    def check(name: str, worst: dict[str, float], tolerance: dict[str, float]) -> dict:
        return {
            "name": name,
            "passed": all(worst[k] < tolerance[k] for k in worst),
            "detail": {f"worst_{k}": v for k, v in worst.items()} | {f"tolerance_{k}": v for k, v in tolerance.items()},
        }

    found = [a for _, a in answers]
    forward = max(forward_difference(model, ids, a) for ids, a in answers)
    attention = max(
        abs(sum(row) - 1) for a in found for layer in a["layers"][1:] for row in layer["attention"]["heads"]
    )
    shares = max(
        abs(sum(a["similarity"][k]) - a["similarity"]["cosine"]) for a in found for k in ("text_shares", "other_shares")
    )
    if model.config.mlm:  # each logit is the head's state · the word's embedding + its bias; the softmax's ratios
        rule = {
            "decoder": max(abs(t["dot"] + t["bias"] - t["logit"]) for a in found for t in a["top"]),
            "softmax": max(
                abs(t["exp"] / a["softmax"]["denominator"] - t["probability"]) for a in found for t in a["top"]
            ),
        }
        limits = {"decoder": 1e-4, "softmax": 1e-6}
    else:  # the sentence embedding is scaled to length one
        rule = {"length": max(abs(sum(v * v for v in a["sentence"]["embedding"]) ** 0.5 - 1) for a in found)}
        limits = {"length": 1e-5}
    return [
        check(
            "The trace's read-out (the MLM head's logits, or the sentence embedding) is the model's own forward "
            "over the whole sequence",
            {"difference": forward},
            {"difference": 1e-4},
        ),
        check(
            "Every head's attention from the traced token sums to one", {"difference": attention}, {"difference": 1e-5}
        ),
        check(
            "Each sentence's token shares sum to the cosine similarity", {"difference": shares}, {"difference": 1e-5}
        ),
        check(
            "The head reads out by its rule: each logit is the MLM state's dot product with the word's embedding "
            "plus its bias (the decoder is tied) and each probability is exp(logit - max logit) over the "
            "denominator; without the MLM head, the sentence embedding has length one",
            rule,
            limits,
        ),
    ]


def replay(checkpoint: str | None = None, case: str | None = None) -> dict:
    """The recorded cases on the checkpoint and the checks, or the case named alone; the checks alone without a
    checkpoint (on random weights, with and without the MLM head)."""
    if checkpoint is None:
        if case is not None:
            raise KeyError(f"no recorded case {case!r}: without a checkpoint there is none")
        model = build_model()
        answer = trace(model, CHECK_IDS, CHECK_IDS.index(103), TOP, str, CHECK_OTHER)
        return {"cases": {}, "checks": checks([(CHECK_IDS, answer)], model)}
    if case is not None:
        if case not in CASES:
            raise KeyError(f"no recorded case {case!r}; the cases are {', '.join(CASES)}")
        return {"cases": {case: recorded(checkpoint, case)}, "checks": []}
    model = load(checkpoint).model
    answers = {case_id: datalab(checkpoint, **CASES[case_id].request(model.config.mlm)) for case_id in CASES}
    cases = {case_id: shown(answer, case_id, model.config.mlm) for case_id, answer in answers.items()}
    ids = [[t["id"] for t in a["tokens"]] for a in answers.values()]
    return {"cases": cases, "checks": checks(list(zip(ids, answers.values(), strict=True)), model)}


def shown(answer: dict, case_id: str, mlm: bool) -> dict:
    """A DataLab answer as the recorded case, with the lab request that reproduces it."""
    return case(answer) | {"request": CASES[case_id].request(mlm)}


def recorded(checkpoint: str, case_id: str) -> dict:
    """One recorded case on the checkpoint."""
    mlm = load(checkpoint).model.config.mlm
    return shown(datalab(checkpoint, **CASES[case_id].request(mlm)), case_id, mlm)


if __name__ == "__main__":
    torch.manual_seed(0)
    result = replay(sys.argv[1] if len(sys.argv) > 1 else None)
    for case_id, found in result["cases"].items():
        metrics = {m["key"]: m["value"] for m in found["metrics"]}
        print(
            f"{case_id}: {found['request']['text']!r} -> similarity {metrics['similarity']:.3f} to "
            f"{found['request']['other']!r}"
            + (f", id {metrics['prediction_id']} (p {metrics['confidence']:.3f})" if "prediction_id" in metrics else "")
        )
    for check in result["checks"]:
        print(("PASS " if check["passed"] else "FAIL ") + check["name"], check["detail"])
