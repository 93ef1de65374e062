"""The result of the DataLab endpoint: one [MASK] traced through a checkpoint, stage by stage."""

from typing import NotRequired

from typing_extensions import TypedDict


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
    lens: Lens


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


class DataLabTrace(TypedDict):
    tokens: list[WordPiece]
    mask_positions: list[int]
    checkpoint: DataLabCheckpoint
    position: int
    segment_ids: list[int]
    embedding: DataLabEmbedding
    layers: list[DataLabLayer]
    head_state: list[float]
    top: list[DataLabScored]
    softmax: DataLabSoftmax
    prediction: LensWord
