"""The results of the causal DataLab's endpoints: a trace, a generation and a patching grid."""

from typing_extensions import TypedDict

from ...shapes import CheckpointProbe


class PromptToken(TypedDict):
    index: int
    id: int
    token: str  # the byte-level BPE piece ("Ġthe")
    text: str  # what it reads as (" the")


class PromptWord(TypedDict):
    id: int
    token: str
    text: str
    probability: float


class PromptScored(TypedDict):
    id: int
    token: str
    text: str
    logit: float
    probability: float


class PromptCheckpoint(TypedDict):
    layers: int
    heads: int
    width: int
    vocab: int
    positions: int
    weights: str
    parameters: int
    probe: CheckpointProbe


class PromptResidual(TypedDict):
    name: str
    norms: list[float]
    last: list[float]


class PromptLens(TypedDict):
    name: str
    rank: int
    probability: float
    top: list[PromptWord]


class PromptTrace(TypedDict):
    checkpoint: PromptCheckpoint
    tokens: list[PromptToken]
    attention: list[list[list[list[float]]]]  # (blocks, heads, query, key)
    residual: list[PromptResidual]
    lens: list[PromptLens]
    top: list[PromptScored]
    prediction: PromptWord


class PromptStep(TypedDict):
    id: int
    token: str
    text: str
    probability: float
    top: list[PromptWord]


class PromptGeneration(TypedDict):
    checkpoint: PromptCheckpoint
    prompt: list[PromptToken]
    steps: list[PromptStep]
    text: str
    strategy: str
    seed: int
    temperature: float
    top_k: int | None


class PromptAnswer(TypedDict):
    id: int
    token: str
    text: str


class PromptPatching(TypedDict):
    checkpoint: PromptCheckpoint
    tokens: list[PromptToken]
    corrupted_tokens: list[PromptToken]
    answer: PromptAnswer
    foil: PromptAnswer
    clean: float
    corrupted: float
    patched: list[list[float]]  # (blocks, heads)
    effect: list[list[float]]
    stream_patched: list[list[float]]  # (blocks, tokens): the stream entering each block, patched at one token
    stream_effect: list[list[float]]
    measure: str
