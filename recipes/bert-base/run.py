"""Replay: the recorded DataLab cases on the server's checkpoint, and checks of how BERT computes.

    python run.py /path/to/checkpoint     # the cases and checks on that checkpoint
    python run.py                         # the checks alone, on random weights of BERT-base's shape

Without a checkpoint there is nothing trained to record: the checks still hold for any weights.
"""

import sys

import torch

try:
    from .lab import datalab, load, trace
    from .model import BertForMaskedLM, build_model
except ImportError:  # run as a script: python run.py
    from lab import datalab, load, trace
    from model import BertForMaskedLM, build_model

# Each recorded case: a sentence and the lab request that traces it.
CASES = {
    "capital": "The capital of France is [MASK].",
    "river": "She sat on the bank of the [MASK] and watched the boats.",
    "two-masks": "The [MASK] chased the cat up the [MASK].",
}
TOP = 10  # predictions recorded per case
CHECK_IDS = [101, 1996, 3007, 1997, 2605, 2003, 103, 1012, 102]  # a 9-token sequence for the weight-free checks


def case(answer: dict) -> dict:
    """A DataLab answer as recorded vectors, matrices and metrics."""
    layers = answer["layers"]
    return {
        "vectors": [
            {"key": "input_ids", "label": "Token ids", "values": [t["id"] for t in answer["tokens"]]},
            {"key": "top_ids", "label": f"Top {TOP} predicted token ids", "values": [t["id"] for t in answer["top"]]},
            {"key": "top_probabilities", "label": f"Top {TOP} probabilities",
             "values": [t["probability"] for t in answer["top"]]},
            {"key": "top_logits", "label": f"Top {TOP} logits", "values": [t["logit"] for t in answer["top"]]},
            {"key": "lens_probability", "label": "Probability of the prediction after each layer (logit lens)",
             "values": [layer["lens"]["probability"] for layer in layers]},
            {"key": "lens_cosine", "label": "Cosine of each layer's state to the final state",
             "values": [layer["lens"]["cosine"] for layer in layers]},
            {"key": "embedding", "label": "Embedding of the traced token after LayerNorm",
             "values": answer["embedding"]["norm"]},
            {"key": "final_state", "label": "Final state of the traced token", "values": layers[-1]["state"]},
        ],
        "matrices": [
            {"key": "attention_last", "label": "Last layer: every head's attention from the traced token",
             "values": layers[-1]["attention"]["heads"]},
            {"key": "ffn_last", "label": "Last layer: the FFN's units before and after GELU",
             "values": [layers[-1]["ffn"]["before"], layers[-1]["ffn"]["after"]]},
        ],
        "metrics": [
            {"key": "prediction_id", "label": "Predicted token id", "value": answer["prediction"]["id"]},
            {"key": "confidence", "label": "Probability of the prediction",
             "value": answer["prediction"]["probability"]},
            {"key": "denominator", "label": "Softmax denominator (after the max shift)",
             "value": answer["softmax"]["denominator"]},
        ],
    }


@torch.no_grad()
def forward_difference(model: BertForMaskedLM, answer: dict) -> float:
    """How far the trace's logits are from the model's own forward over the whole sequence."""
    ids = torch.tensor([[t["id"] for t in answer["tokens"]]]) if "tokens" in answer else torch.tensor([CHECK_IDS])
    logits = model(ids)[0, answer["position"]]  # (vocab,)
    return max(abs(logits[t["id"]].item() - t["logit"]) for t in answer["top"])


def checks(answers: list[dict], model: BertForMaskedLM) -> list[dict]:
    """What holds for any weights: the trace is the model's forward, the decoder is tied, the softmaxes."""
    forward = max(forward_difference(model, a) for a in answers)
    decoder = max(abs(t["dot"] + t["bias"] - t["logit"]) for a in answers for t in a["top"])
    attention = max(abs(sum(row) - 1) for a in answers for layer in a["layers"][1:]
                    for row in layer["attention"]["heads"])
    softmax = max(abs(t["exp"] / a["softmax"]["denominator"] - t["probability"]) for a in answers for t in a["top"])
    return [
        {"name": "The trace's logits are the model's own forward over the whole sequence", "passed": forward < 1e-4,
         "detail": {"worst_difference": forward, "tolerance": 1e-4}},
        {"name": "Each logit is the MLM state's dot product with the token's word embedding plus its bias "
                 "(the decoder is tied to the embeddings)", "passed": decoder < 1e-4,
         "detail": {"worst_difference": decoder, "tolerance": 1e-4}},
        {"name": "Every head's attention from the traced token sums to one", "passed": attention < 1e-5,
         "detail": {"worst_difference": attention, "tolerance": 1e-5}},
        {"name": "Each probability is exp(logit - max logit) over the stated denominator", "passed": softmax < 1e-6,
         "detail": {"worst_difference": softmax, "tolerance": 1e-6}},
    ]


def replay(checkpoint: str | None = None, case: str | None = None) -> dict:
    """The recorded cases on the checkpoint and the checks, or the case named alone; the checks alone without a
    checkpoint."""
    if checkpoint is None:
        if case is not None:
            raise KeyError(f"no recorded case {case!r}: without a checkpoint there is none")
        model = build_model()
        answer = trace(model, CHECK_IDS, CHECK_IDS.index(103), TOP, str)
        return {"cases": {}, "checks": checks([answer], model)}
    if case is not None:
        if case not in CASES:
            raise KeyError(f"no recorded case {case!r}; the cases are {', '.join(CASES)}")
        return {"cases": {case: recorded(checkpoint, case)}, "checks": []}
    model = load(checkpoint).model
    answers = {case_id: datalab(checkpoint, text, TOP) for case_id, text in CASES.items()}
    cases = {case_id: shown(answer, case_id) for case_id, answer in answers.items()}
    return {"cases": cases, "checks": checks(list(answers.values()), model)}


def shown(answer: dict, case_id: str) -> dict:
    """A DataLab answer as the recorded case, with the lab request that reproduces it."""
    return case(answer) | {"request": {"text": CASES[case_id], "top_k": TOP}}


def recorded(checkpoint: str, case_id: str) -> dict:
    """One recorded case on the checkpoint."""
    return shown(datalab(checkpoint, CASES[case_id], TOP), case_id)


if __name__ == "__main__":
    torch.manual_seed(0)
    result = replay(sys.argv[1] if len(sys.argv) > 1 else None)
    for case_id, recorded in result["cases"].items():
        metrics = {m["key"]: m["value"] for m in recorded["metrics"]}
        print(f"{case_id}: {CASES[case_id]!r} -> id {metrics['prediction_id']} (p {metrics['confidence']:.3f})")
    for check in result["checks"]:
        print(("PASS " if check["passed"] else "FAIL ") + check["name"], check["detail"])
