"""The results of a causal-LM lab's generation and trace endpoints (its runs answer a case)."""

from typing import Annotated, Literal

from pydantic import Field
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


# The stages of a trace, in order, each with the parts that describe it (its `id` says which): the tokens, the
# embeddings, one stage per block (block0, block1, ...), the final norm, the logits and the prediction.
class CausalTokens(TypedDict):
    id: Literal["tokens"]
    values: list[int]
    words: list[str]
    position: int
    token: int


class CausalEmbeddings(TypedDict):
    id: Literal["embeddings"]
    token_embedding: list[float]
    position_embedding: list[float]
    values: list[float]


class CausalBlock(TypedDict):
    id: Annotated[str, Field(pattern=r"^block[0-9]+$")]
    block: int
    input: list[float]
    ln_1: list[float]
    heads: list[CausalHead]
    masked_after: int  # the keys after this position are removed by the causal mask
    attention_output: list[float]
    after_attention: list[float]
    ln_2: list[float]
    before_gelu: list[float]
    after_gelu: list[float]
    passed: list[int]
    squeezed: list[int]
    mlp_output: list[float]
    values: list[float]


class CausalFinalNorm(TypedDict):
    id: Literal["final_norm"]
    input: list[float]
    values: list[float]


class CausalLogits(TypedDict):
    id: Literal["logits"]
    table: list[CausalScored]
    values: list[float]
    max_shift: float
    sum_exp: float


class CausalPrediction(TypedDict):
    id: Literal["prediction"]
    token: int
    word: str
    probability: float
    actual_next: int | None  # null: the last position has no next token


CausalStage = CausalTokens | CausalEmbeddings | CausalBlock | CausalFinalNorm | CausalLogits | CausalPrediction


class CausalTrace(TypedDict):
    input_ids: list[int]
    position: int
    stages: list[CausalStage]
