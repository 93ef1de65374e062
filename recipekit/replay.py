"""run.py's replay: every recorded case and every check, or one case alone (what What if? and the training stages
run on a case), iterated processes replayed step by step, and run.py's main.

    def replay(model=None, case=None):
        model = model if model is not None else build_model()
        return cases({"zero": partial(run_case, model, 0), ...}, {CHECK: partial(check, model)}, case)

A case's function must compute the case alone exactly as it computes it among the others (seeding its own draws):
the recorder checks that each case replayed alone equals the case in the whole replay.

An iterated process (a diffusion chain, an episode, a generation, a recurrent scan) names the state that enters each
of its steps with one call, at the top of the step:

    for t in range(T, 0, -1):
        x = step_state("reverse", x, f"t = {t}")   # (1, 1, 8, 8): the image entering step t
        ...

Replayed as usual, the call hands the state back and keeps a copy in the case's replay (`steps`), which the recorder
stores. Checked step by step (`stepwise`), it hands back the recorded state instead, so that every step starts from
the state the recording had there, and keeps the one the recipe computed: a verifier compares each with the
recording, one step at a time, and names the first step that left its bound, where a free run would only show how
far rounding had drifted by the end.
"""

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class _Process:
    """One iterated process of a case: the states that entered its steps, flattened, and each step's name."""

    states: list[list[float]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


@dataclass
class _Case:
    """The processes of the case being replayed, and the recorded states each step starts from when checked step by
    step (by process; None when it runs freely)."""

    given: Mapping[str, list[list[float]]] | None
    processes: dict[str, _Process] = field(default_factory=dict)


_CASE: ContextVar[_Case | None] = ContextVar("case", default=None)
# The recorded states, by case id and process, while a replay is checked step by step (stepwise()).
_GIVEN: ContextVar[Mapping[str, Mapping[str, list[list[float]]]] | None] = ContextVar("given", default=None)


def step_state(process: str, state, step: str | None = None):
    """The state that enters one step of `process`: `state` itself (its copy kept in the case's replay), or, checked
    step by step, the state the recording had there (the one the recipe computed kept for the comparison). A state is
    a tensor, a number, or a tuple of them (an LSTM's (h, c), a grid cell's (row, column)); `step` names the step
    ("t = 37"). Outside a replay (a lab run, a capture) it is `state` and nothing is kept."""
    case = _CASE.get()
    if case is None:
        return state
    kept = case.processes.setdefault(process, _Process())
    index = len(kept.states)
    kept.states.append(_flat(state))
    kept.names.append(step or f"step {index + 1}")
    given = None if case.given is None else case.given.get(process)
    if given is None or index >= len(given):  # a process that runs longer than recorded runs on freely
        return state
    return _shaped(list(given[index]), state)


def _flat(state) -> list[float]:
    if isinstance(state, Tensor):
        return state.detach().flatten().double().tolist()  # float32's values exactly, as JSON keeps them
    if isinstance(state, tuple | list):
        return [x for part in state for x in _flat(part)]
    if isinstance(state, bool | int | float):
        return [float(state)]
    raise TypeError(f"step_state: a state is a tensor, a number or a tuple of them, not {type(state).__name__}")


def _shaped(values: list[float], like):
    """`values` (taken from the front) in the shape, type and dtype of `like`."""
    if isinstance(like, Tensor):
        size = like.numel()
        taken, values[:size] = values[:size], []
        return torch.tensor(taken, dtype=like.dtype).reshape(like.shape)
    if isinstance(like, tuple | list):
        return type(like)(_shaped(values, part) for part in like)
    taken = values.pop(0)
    return type(like)(taken) if isinstance(like, bool | int) else taken


@contextmanager
def stepwise(recorded: Mapping[str, Mapping[str, list[list[float]]]]) -> Iterator[None]:
    """While inside, each case named in `recorded` (by case id, by process: the states that entered its steps) is
    replayed step by step: every step starts from the recorded state."""
    token = _GIVEN.set(recorded)
    try:
        yield
    finally:
        _GIVEN.reset(token)


def _made(case_id: str, make: Callable[[], dict]) -> tuple[dict, dict]:
    """A case made, and the states of its iterated processes (by process: states and step names)."""
    given = _GIVEN.get()
    token = _CASE.set(_Case(None if given is None else given.get(case_id, {})))
    try:
        made = make()
        processes = _CASE.get().processes
    finally:
        _CASE.reset(token)
    return made, {name: {"states": p.states, "names": p.names} for name, p in processes.items()}


def cases(
    made: Mapping[str, Callable[[], dict]], checks: Mapping[str, Callable[[], dict]], case: str | None = None
) -> dict:
    """{"cases": {id: case}, "checks": [{"name", "passed", "detail"}]}: every case and check, or with `case`
    that case alone and no check; and, where a case runs an iterated process, "steps": {id: {process: {"states",
    "names"}}}."""
    if case is not None and case not in made:
        raise KeyError(f"no recorded case {case!r}; the cases are {', '.join(made)}")
    chosen = {case: made[case]} if case is not None else made
    replayed, steps = {}, {}
    for case_id, make in chosen.items():
        replayed[case_id], processes = _made(case_id, make)
        if processes:
            steps[case_id] = processes
    result = {
        "cases": replayed,
        "checks": [] if case is not None else [{"name": name, **check()} for name, check in checks.items()],
    }
    return result | ({"steps": steps} if steps else {})


# Why a count is reproduced exactly: the `why` of reproduced() for a share of right answers.
COUNTED = "a count of right answers: rounding moves it only where it flips an answer at a near tie"


def reproduced(replayed: float, trained: float, allowed: float, why: str) -> dict:
    """A check that a figure train.py measured and stored is measured again: within `allowed` (0 for a count, which
    rounding cannot move but through a near tie), and `why` that much: what the figure sums and in what precision."""
    difference = abs(replayed - trained)
    return {
        "passed": difference <= allowed,
        "detail": {
            "replayed": replayed,
            "at_training": trained,
            "difference": difference,
            "allowed": allowed,
            "why": why,
        },
    }


def main(replay: Callable[..., dict], argv: list[str]) -> int:
    """run.py's main: the replay as a readable table (each case's metrics, each check), or with --json as JSON;
    exit status 1 when a check fails."""
    torch.use_deterministic_algorithms(True)
    result = replay()
    if "--json" in argv:
        print(json.dumps(result, indent=2))
    else:
        for case_id, case in result["cases"].items():
            shown = ", ".join(f"{m['label']} {_short(m['value'])}" for m in case.get("metrics", []))
            print(f"{case_id}: {shown or case.get('label', '')}")
        for check in result["checks"]:
            print(f"[{'PASS' if check['passed'] else 'FAIL'}] {check['name']}  {check.get('detail', '')}")
    return 0 if all(check["passed"] for check in result["checks"]) else 1


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
