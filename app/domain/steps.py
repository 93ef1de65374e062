"""An intervention step: what domain/interventions.plan makes of a request's intervention, and what a recipe process
runs (compute/intervene.py). It travels between them as plain data, so it imports nothing a recipe process would not."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One intervention as planned (plan() makes it) and as a recipe process runs it (compute/intervene.py):
    `action` on the `on` ("output" or "input") of `target`, which is `node` itself or, for a head, its projection; a
    head's slice where `head` is set (`heads`: the count, or the attention module's attribute holding it); `source`,
    the index of the run a patch takes its tensor from (`from_case` names that case)."""

    node: str
    action: str
    target: str
    on: str
    head: int | None = None
    heads: int | str | None = None
    factor: float | None = None
    from_case: str | None = None
    source: int | None = None

    def shown(self) -> dict:
        """The intervention as the client wrote it (the plan's internals left out)."""
        return {key: value for key in ("node", "action", "head", "factor", "from_case")
                if (value := getattr(self, key)) is not None}
