"""What a model's recorded weights are, as its recipe.toml declares them, so that a reader knows whether its
predictions mean anything:

    [weights]
    state = "trained"  # trained by the recipe itself, "pretrained" (a checkpoint read on the server) or "random"
    on = "10,000 sequences its train.py generates"  # what a trained model learned from
"""

from dataclasses import dataclass

from .labs.fields import DeclarationError

STATES = ("trained", "pretrained", "random")


@dataclass(frozen=True)
class Weights:
    state: str
    on: str = ""


def declared_weights(declaration: dict) -> Weights | None:
    """The [weights] table checked; None where a recipe says nothing (the card then says nothing either)."""
    if not declaration:
        return None
    state, on = declaration.get("state"), declaration.get("on", "")
    if state not in STATES:
        raise DeclarationError(f"weights.state must be one of {', '.join(STATES)}, not {state!r}")
    if not isinstance(on, str) or (state == "trained" and not on.strip()):
        raise DeclarationError("weights.on must say, as text, what the recipe trained its model on")
    return Weights(state, on.strip())
