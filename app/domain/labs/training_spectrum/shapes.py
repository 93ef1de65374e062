"""The result of the training-spectrum lab's endpoint: one round of a training, and every round's accuracies."""

from typing_extensions import TypedDict


class TrainingRound(TypedDict):
    round: int  # from 1
    step: int  # the steps trained by the end of that round
    frequencies: list[str]  # each frequency's name ("k = 3")
    spectrum: list[float]  # the embedding's share of power at each frequency, after that round (summing to 1)
    key_frequencies: list[int]  # the strongest of them, in order
    key_share: float  # their share together
    train_accuracy: list[float]  # after every round, from round 1
    test_accuracy: list[float]  # on the held-out half, after every round
