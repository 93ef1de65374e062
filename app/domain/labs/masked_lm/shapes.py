"""The results of a masked-LM lab's corruption sampler and trace endpoints (its runs answer a case)."""

from typing import NotRequired

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
    query: NotRequired[list[float]]
    keys: NotRequired[list[list[float]]]
    scores: list[float | None]
    masked: NotRequired[list[int]]
    weights: list[float]
    top_context: list[MaskedAttended]


class MaskedScored(TypedDict):
    token: int
    dot: NotRequired[float]
    bias: NotRequired[float]
    logit: float
    exp: NotRequired[float]
    probability: NotRequired[float]


class MaskedStage(TypedDict):
    """One stage of the token's way through the encoder; each stage carries the parts that describe it."""

    id: str
    values: NotRequired[list[float] | list[int]]
    token: NotRequired[int]
    position: NotRequired[int]
    caption: NotRequired[str]
    word: NotRequired[list[float]]
    position_embedding: NotRequired[list[float]]
    segment: NotRequired[list[float]]
    input: NotRequired[list[float]]
    heads: NotRequired[list[MaskedHead]]
    mask: NotRequired[str]
    projected: NotRequired[list[float]]
    residual_sum: NotRequired[list[float]]
    before_gelu: NotRequired[list[float]]
    after_gelu: NotRequired[list[float]]
    passed: NotRequired[list[int]]
    suppressed: NotRequired[list[int]]
    down: NotRequired[list[float]]
    transform: NotRequired[list[float]]
    gelu: NotRequired[list[float]]
    table: NotRequired[list[MaskedScored]]
    sum_exp: NotRequired[float]
    predicted: NotRequired[int | str]
    confidence: NotRequired[float]
    cls: NotRequired[list[float]]
    pooler: NotRequired[list[float]]
    tanh: NotRequired[list[float]]
    logits: NotRequired[list[float]]


class MaskedTrace(TypedDict):
    input_ids: list[int]
    segment_ids: list[int]
    position: int
    attention: str
    stages: list[MaskedStage]
