"""The results of a causal-LM lab's generation and trace endpoints (its runs answer a case)."""

from typing import NotRequired

from typing_extensions import TypedDict


class NextToken(TypedDict):
    token: int
    word: str
    probability: float


class GenerationStep(TypedDict):
    position: int
    context: list[int]
    top: list[NextToken]  # the model's most likely next tokens
    drawn_top: list[NextToken]  # the same after temperature and top-k: what the pick was drawn from
    probabilities: list[float]
    drawn: list[float]
    pick: int
    word: str
    pick_probability: float


class Generation(TypedDict):
    prompt: list[int]
    strategy: str
    temperature: float
    top_k: int | None
    seed: int
    steps: list[GenerationStep]
    output_ids: list[int]
    text: str


class CausalAttended(TypedDict):
    position: int
    token: int
    weight: float


class CausalHead(TypedDict):
    head: int
    scores: list[float | None]  # null: removed by the causal mask
    weights: list[float]
    top_context: list[CausalAttended]


class CausalScored(TypedDict):
    token: int
    word: str
    dot: float
    logit: float
    exp: float
    probability: float


class CausalStage(TypedDict):
    """One stage of the position's way through the model; each stage carries the parts that describe it."""

    id: str
    values: NotRequired[list[float] | list[int]]
    words: NotRequired[list[str]]
    position: NotRequired[int]
    token: NotRequired[int]
    token_embedding: NotRequired[list[float]]
    position_embedding: NotRequired[list[float]]
    block: NotRequired[int]
    input: NotRequired[list[float]]
    ln_1: NotRequired[list[float]]
    heads: NotRequired[list[CausalHead]]
    masked_after: NotRequired[int]
    attention_output: NotRequired[list[float]]
    after_attention: NotRequired[list[float]]
    ln_2: NotRequired[list[float]]
    before_gelu: NotRequired[list[float]]
    after_gelu: NotRequired[list[float]]
    passed: NotRequired[list[int]]
    squeezed: NotRequired[list[int]]
    mlp_output: NotRequired[list[float]]
    table: NotRequired[list[CausalScored]]
    max_shift: NotRequired[float]
    sum_exp: NotRequired[float]
    word: NotRequired[str]
    probability: NotRequired[float]
    actual_next: NotRequired[int | None]  # null: the last position has no next token


class CausalTrace(TypedDict):
    input_ids: list[int]
    position: int
    stages: list[CausalStage]
