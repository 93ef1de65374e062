"""The results of a masked-LM lab's corruption sampler and trace endpoints (its runs answer a case)."""

from typing import Literal

from typing_extensions import TypedDict


class Corrupted(TypedDict):
    position: int
    original: int
    selected: bool
    action: str | None  # what the corruption did to a selected token: masked, replaced, kept
    token: int


class MaskedRunRequest(TypedDict):
    input_ids: list[int]
    segment_ids: list[int]
    mlm_positions: list[int]
    original_ids: list[int]
    nsp_label: int
    attention: str


class Corruption(TypedDict):
    seed: int
    positions: list[Corrupted]
    input_ids: list[int]
    original_ids: list[int]
    mlm_positions: list[int]
    run_request: MaskedRunRequest  # the corrupted sequence as a what-if run's request


class MaskedAttended(TypedDict):
    position: int
    token: int
    weight: float


class MaskedHead(TypedDict):
    head: int
    query: list[float]
    keys: list[list[float]]
    scores: list[float | None]  # null: removed by the causal mask
    masked: list[int]  # the keys the mask removed
    weights: list[float]
    top_context: list[MaskedAttended]


class MaskedLogit(TypedDict):
    """A row of the decoder: the token's logit as the dot product with its embedding plus the bias."""

    token: int
    dot: float
    bias: float
    logit: float


class MaskedProbability(TypedDict):
    token: int
    logit: float
    exp: float
    probability: float


# The stages of a trace, in order, each with the parts that describe it (its `id` says which) and its caption.
class MaskedTokens(TypedDict):
    id: Literal["tokens"]
    caption: str
    values: list[int]
    token: int
    position: int


class MaskedEmbeddings(TypedDict):
    id: Literal["embeddings"]
    caption: str
    word: list[float]
    position_embedding: list[float]
    segment: list[float]
    values: list[float]


class MaskedEmbeddingNorm(TypedDict):
    id: Literal["embedding_norm"]
    caption: str
    input: list[float]
    values: list[float]


class MaskedAttention(TypedDict):
    id: Literal["attention"]
    caption: str
    heads: list[MaskedHead]
    mask: str  # bidirectional or causal


class MaskedAttentionOutput(TypedDict):
    id: Literal["attention_output"]
    caption: str
    projected: list[float]
    residual_sum: list[float]
    values: list[float]


class MaskedFFNUp(TypedDict):
    id: Literal["ffn_up"]
    caption: str
    before_gelu: list[float]
    after_gelu: list[float]
    passed: list[int]
    suppressed: list[int]
    values: list[float]


class MaskedFFNDown(TypedDict):
    id: Literal["ffn_down"]
    caption: str
    down: list[float]
    residual_sum: list[float]
    values: list[float]


class MaskedHeadTransform(TypedDict):
    id: Literal["mlm_head"]
    caption: str
    transform: list[float]
    gelu: list[float]
    values: list[float]


class MaskedLogits(TypedDict):
    id: Literal["logits"]
    caption: str
    table: list[MaskedLogit]
    values: list[float]


class MaskedSoftmax(TypedDict):
    id: Literal["softmax"]
    caption: str
    table: list[MaskedProbability]
    sum_exp: float
    values: list[float]
    predicted: int
    confidence: float


class MaskedNextSentence(TypedDict):
    id: Literal["nsp"]
    caption: str
    cls: list[float]
    pooler: list[float]
    tanh: list[float]
    logits: list[float]
    values: list[float]
    predicted: str  # IsNext or NotNext


MaskedStage = (MaskedTokens | MaskedEmbeddings | MaskedEmbeddingNorm | MaskedAttention | MaskedAttentionOutput
               | MaskedFFNUp | MaskedFFNDown | MaskedHeadTransform | MaskedLogits | MaskedSoftmax | MaskedNextSentence)


class MaskedTrace(TypedDict):
    input_ids: list[int]
    segment_ids: list[int]
    position: int
    attention: str
    stages: list[MaskedStage]
