"""The result of an image-classifier lab's trace endpoint (its runs answer a case)."""

from typing import Literal, NotRequired

from typing_extensions import TypedDict

Grid = list[float] | list[list[float]] | list[list[list[float]]]  # a vector, a map, or maps by channel


class ImageUnit(TypedDict):
    unit: int
    weight: float
    activation: float
    contribution: float


# The stages of a trace: first the logit, exact (its bias plus each hidden unit's weight times its activation), then
# each traced layer back to the drawing, with activation × gradient.
class ImageLogit(TypedDict):
    id: Literal["logit"]
    title: str
    logit: float
    bias: float
    probability: float
    weights: list[float]
    hidden: list[float]
    contributions: list[float]
    strongest: list[ImageUnit]
    check: float  # the contributions and the bias summed again: the logit


class ImageAttributed(TypedDict):
    id: str  # the layer's name, or "input" for the drawing
    title: str
    shape: list[int]
    activation: Grid
    attribution: Grid
    total: float
    channel_totals: NotRequired[list[float]]  # where the layer's output is maps by channel


ImageStage = ImageLogit | ImageAttributed


class ImageTrace(TypedDict):
    target: int
    predicted: int
    probabilities: list[float]
    stages: list[ImageStage]
    method: str
