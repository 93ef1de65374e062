"""The result of the DataLab endpoint: one token traced through a checkpoint, stage by stage, to the MLM head's
prediction (`checkpoint.head` "mlm") or the sentence's embedding ("sentence")."""

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from ...shapes import CheckpointProbe


class WordPiece(TypedDict):
    index: int
    token: str
    id: int
    special: bool


class DataLabCheckpoint(TypedDict):
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    lowercase: bool
    weights: str
    parameters: int
    head: Literal["mlm", "sentence"]
    probe: CheckpointProbe


class DataLabEmbedding(TypedDict):
    token_id: int
    position: int
    segment: int
    word: list[float]
    position_vector: list[float]
    segment_vector: list[float]
    sum: list[float]
    norm: list[float]


class Arc(TypedDict):
    to: int
    weight: float


class DataLabAttention(TypedDict):
    heads: list[list[float]]
    arcs: list[list[Arc]]


class FFNUnit(TypedDict):
    unit: int
    before: float
    after: float


class FFN(TypedDict):
    before: list[float]
    after: list[float]
    passed: int
    squeezed: int
    strongest: list[FFNUnit]


class LensWord(TypedDict):
    token: str
    id: int
    probability: float


class Lens(TypedDict):
    rank: int
    probability: float
    top: list[LensWord]
    cosine: float


class DataLabLayer(TypedDict):
    index: int
    name: str
    attention: NotRequired[DataLabAttention]
    post_attention: NotRequired[list[float]]
    ffn: NotRequired[FFN]
    state: list[float]
    lens: NotRequired[Lens]  # the MLM head's reading of the state, where the checkpoint has the head


class DataLabScored(TypedDict):
    token: str
    id: int
    dot: float
    bias: float
    logit: float
    exp: float
    probability: float


class DataLabSoftmax(TypedDict):
    max_logit: float
    shift: float
    denominator: float
    vocabulary: int
    rule: str


class Sentence(TypedDict):
    tokens: int
    mean: list[float]
    length: float
    embedding: list[float]
    rule: str


class Similarity(TypedDict):
    cosine: float
    text_shares: list[float]
    other_shares: list[float]
    other_tokens: list[WordPiece]
    rule: str


class DataLabTrace(TypedDict):
    tokens: list[WordPiece]
    mask_positions: list[int]
    checkpoint: DataLabCheckpoint
    position: int
    segment_ids: list[int]
    embedding: DataLabEmbedding
    layers: list[DataLabLayer]
    # The MLM head's stages, where the checkpoint has the head:
    head_state: NotRequired[list[float]]
    top: NotRequired[list[DataLabScored]]
    softmax: NotRequired[DataLabSoftmax]
    prediction: NotRequired[LensWord]
    # The encoder's reading, where it has none:
    sentence: NotRequired[Sentence]
    # With a second sentence (`other`):
    similarity: NotRequired[Similarity]
