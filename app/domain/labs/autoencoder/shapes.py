"""The results of an autoencoder lab's endpoints (its runs answer a case)."""

from typing_extensions import TypedDict

Image = list[list[float]]  # rows of grey levels (the probability of ink × the levels)


class Decoded(TypedDict):
    code: list[float]
    image: Image


class Path(TypedDict):
    """The codes on the line from one drawing's code to another's, and the decoder's image at each."""

    codes: list[list[float]]
    images: list[Image]
    ends: list[list[float]]


class Plane(TypedDict):
    """The decoder's image at every code of a grid over the latent plane: `axis` the codes along each
    dimension; `images` rows (the second dimension, from its largest value down) of columns (the first)."""

    axis: list[float]
    images: list[list[Image]]
