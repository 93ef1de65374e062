"""The DataLab kind: one token of a sentence traced through a pretrained BERT-layout checkpoint, stage by stage
(WordPiece tokens, embeddings, every layer's attention and FFN), ending in the MLM head's logit lens, softmax and
prediction of a [MASK], or, for an encoder-only checkpoint, in the sentence's pooled embedding; and the
similarity of two sentences with each token's share of it."""

from ...numbers import in_prose
from ..cases import metrics
from ..fields import DeclarationError
from ..kind import LabKind, Reads
from .shapes import DataLabTrace


class DataLab(LabKind):
    name = "datalab"
    requires = {"endpoints": ("datalab",)}
    # What every checkpoint's answer holds; the MLM head's stages (top, softmax, prediction) or the encoder's
    # sentence embedding follow from `checkpoint.head`, which only the checkpoint found decides.
    reads = {"datalab": Reads(keys=("checkpoint", "tokens", "mask_positions", "position", "embedding", "layers"))}
    says_outcome = ("datalab",)  # its live answers' outcome, said as its recorded cases' (result_outcome)
    results = {"datalab": DataLabTrace}
    limits = {"datalab": {"text": "With the MLM head, must hold [MASK]; at most the checkpoint's positions in "
                                  "WordPiece tokens."}}

    def check(self, spec) -> None:
        """The endpoint takes the sentence as a `text` field, and a second one to compare it with as `other`."""
        fields = spec.endpoints["datalab"].fields
        for name in ("text", "other"):
            if fields.get(name) is None or fields[name].type != "text":
                raise DeclarationError(f"lab.endpoints.datalab of a {self.name} lab needs a `{name}` field of "
                                       "type text")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case with the DataLab request that traced it."""
        return [{"id": case["id"], "label": case["label"], "request": case["request"]}
                for case in cases if isinstance(case.get("request"), dict) and "text" in case["request"]]

    def outcome(self, case: dict, spec) -> str | None:
        """A sentence compared with another: how alike their embeddings point ("cosine similarity 0.84")."""
        similarity = metrics(case).get("similarity")
        return None if similarity is None else alike(similarity)

    def result_outcome(self, endpoint: str, args: dict, result: dict, spec) -> str | None:
        """A live comparison of two sentences, said as a recorded one is."""
        cosine = (result.get("similarity") or {}).get("cosine")
        return alike(cosine) if isinstance(cosine, int | float) else None


def alike(similarity: float) -> str:
    return (f"The two sentences' embeddings point alike to a cosine similarity of {in_prose(similarity, 2)} "
            "(1: the same direction; 0: unrelated).")


KIND = DataLab()
