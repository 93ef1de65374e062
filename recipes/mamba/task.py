"""Selective copying (Gu & Dao, 2023, Figure 2): a span of blanks with a few data tokens at random places, then one
marker for each of them; at each marker the model must give the next data token, in order. Where the data tokens
stand changes from one sequence to the next, so a model must choose what to keep by what each token is.

    . 3 . . 7 . . . 1 . . . . 5 . . ? ? ? ?   ->   3 7 1 5 at the markers
"""

import torch
from torch import Tensor

VOCAB = [".", "1", "2", "3", "4", "5", "6", "7", "8", "?"]  # one character each: a sequence can be typed
BLANK, MARKER = 0, len(VOCAB) - 1
DATA = range(1, MARKER)  # the tokens to copy
SPAN = 16  # positions the data tokens are scattered over
COPIED = 4  # data tokens per sequence, and markers after the span
STEPS = SPAN + COPIED  # a training sequence's length
EXAMPLE = [0, 3, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 5, 0, 0, 9, 9, 9, 9]  # the recorded sequence and the graph's


def example() -> list[int]:
    return list(EXAMPLE)


def batch(size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """`size` sequences (size, STEPS) and their targets, -100 (ignored by the loss) everywhere but at the markers."""
    data = torch.randint(DATA.start, DATA.stop, (size, COPIED), generator=generator)
    where = torch.rand(size, SPAN, generator=generator).argsort(dim=1)[:, :COPIED].sort(dim=1).values
    span = torch.full((size, SPAN), BLANK).scatter(1, where, data)
    tokens = torch.cat([span, torch.full((size, COPIED), MARKER)], dim=1)
    targets = torch.cat([torch.full((size, SPAN), -100), data], dim=1)
    return tokens, targets


def answers(tokens: list[int]) -> tuple[list[int], list[int] | None]:
    """Where the answers are (the markers' positions) and the right ones: the data tokens in order, one per marker.
    None where the sequence has no right answer: a marker before a data token, or more markers than data tokens."""
    at = [k for k, t in enumerate(tokens) if t == MARKER]
    data = [t for t in tokens if t in DATA]
    if not at or len(at) > len(data) or any(t in DATA for t in tokens[at[0] :]):
        return at, None
    return at, data[: len(at)]


def text(tokens: list[int]) -> str:
    return "".join(VOCAB[t] for t in tokens)


def tokens_of(typed: str) -> list[int]:
    return [VOCAB.index(c) for c in typed]
