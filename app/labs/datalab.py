"""The DataLab kind: one [MASK] of a sentence traced through a pretrained masked-LM checkpoint, stage by
stage (WordPiece tokens, embeddings, every layer's attention, FFN and logit lens, the MLM head's softmax)."""

from .fields import DeclarationError, fail

NAME = "datalab"
TEMPLATE = "labs/datalab.html"
SCRIPT = "js/labs/datalab.js"
MASK = "[MASK]"  # the WordPiece vocabularies' mask token, written as such in the text
# What this kind's page relies on, by part of the declaration.
REQUIRES = {"endpoints": ("datalab",)}


def check(spec) -> None:
    """The endpoint takes the sentence as a `text` field."""
    text = spec.endpoints["datalab"].fields.get("text")
    if text is None or text.type != "text":
        raise DeclarationError(f"lab.endpoints.datalab of a {NAME} lab needs a `text` field of type text")


def prepare(endpoint: str, args: dict, spec) -> dict:
    """A text without a [MASK] is refused here, before any run; its length in tokens is the recipe's to check."""
    if MASK not in args["text"]:
        fail("text", f"holds no {MASK} to trace; write {MASK} where a word should be predicted")
    return args


def presets(cases: list[dict], spec) -> list[dict]:
    """Each recorded case with the DataLab request that traced it."""
    return [{"id": case["id"], "label": case["label"], "request": case["request"]}
            for case in cases if isinstance(case.get("request"), dict) and "text" in case["request"]]
