"""The result of an image-classifier lab's trace endpoint (its runs answer a case)."""

from typing import NotRequired

from typing_extensions import TypedDict

Grid = list[float] | list[list[float]] | list[list[list[float]]]  # a vector, a map, or maps by channel


class ImageUnit(TypedDict):
    unit: int
    weight: float
    activation: float
    contribution: float


class ImageStage(TypedDict):
    """One stage of the class's score traced back towards the drawing."""

    id: str
    title: str
    logit: NotRequired[float]
    bias: NotRequired[float]
    probability: NotRequired[float]
    weights: NotRequired[list[float]]
    hidden: NotRequired[list[float]]
    contributions: NotRequired[list[float]]
    strongest: NotRequired[list[ImageUnit]]
    check: NotRequired[float]
    shape: NotRequired[list[int]]
    activation: NotRequired[Grid]
    attribution: NotRequired[Grid]
    total: NotRequired[float]
    channel_totals: NotRequired[list[float]]


class ImageTrace(TypedDict):
    target: int
    predicted: int
    probabilities: list[float]
    stages: list[ImageStage]
    method: str
