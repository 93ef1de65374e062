"""The DataLab kind: one [MASK] of a sentence traced through a pretrained masked-LM checkpoint, stage by
stage (WordPiece tokens, embeddings, every layer's attention, FFN and logit lens, the MLM head's softmax)."""

from ..fields import DeclarationError, fail
from ..kind import LabKind, Reads
from .shapes import DataLabTrace

MASK = "[MASK]"  # the WordPiece vocabularies' mask token, written as such in the text


class DataLab(LabKind):
    name = "datalab"
    requires = {"endpoints": ("datalab",)}
    reads = {"datalab": Reads(keys=("checkpoint", "tokens", "mask_positions", "position", "embedding", "layers",
                                    "head_state", "softmax", "top", "prediction"))}
    results = {"datalab": DataLabTrace}
    limits = {"datalab": {"text": "Must hold [MASK]; at most the checkpoint's positions in WordPiece tokens."}}

    def check(self, spec) -> None:
        """The endpoint takes the sentence as a `text` field."""
        text = spec.endpoints["datalab"].fields.get("text")
        if text is None or text.type != "text":
            raise DeclarationError(f"lab.endpoints.datalab of a {self.name} lab needs a `text` field of type text")

    def prepare(self, endpoint: str, args: dict, spec) -> dict:
        """A text without a [MASK] is refused here, before any run; its length in tokens is the recipe's."""
        if MASK not in args["text"]:
            fail("text", f"holds no {MASK} to trace; write {MASK} where a word should be predicted")
        return args

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case with the DataLab request that traced it."""
        return [{"id": case["id"], "label": case["label"], "request": case["request"]}
                for case in cases if isinstance(case.get("request"), dict) and "text" in case["request"]]


KIND = DataLab()
