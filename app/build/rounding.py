"""The recorder's measurement of rounding: the recipe replayed again under other but legitimate roundings (the other
kernel families this processor runs, and every module's output nudged by a few float32 ulps, a few times), and
each recorded item's envelope fitted to how far they moved it (domain/envelopes.py).

A case that keeps the states of an iterated process is measured twice: run freely, where rounding may build up
over the steps, and step by step from its recorded states, where each step starts where the recording did.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from recipekit.kernels import DESCRIBED, available

from ..compute.executor import run_admitted
from ..compute.messages import RecipeCall
from ..compute.pool import WorkerPool
from ..compute.rounding import NUDGE_ULPS
from ..domain.compare import ENVELOPE, STEP_ENVELOPE, Tolerance, compare_case, recorded_states, tolerance_for
from ..domain.envelopes import FACTOR, fit, movement
from ..domain.schema import ITEMS

NUDGES = (1, 2, 3)  # the seeds of the nudged replays


class MeasurementError(Exception):
    """Rounding moves a recorded value beyond any envelope, or the step-by-step replay does not reproduce the free
    run: the message names the case and the value."""


@dataclass(frozen=True)
class Rounding:
    """One other rounding the recipe is replayed under: a kernel family, or the recording's own with a nudge."""

    name: str
    kernels: str
    nudge: int | None = None


def roundings(own: str) -> list[Rounding]:
    """The roundings a recording made with the kernel family `own` is measured under."""
    families = [Rounding(DESCRIBED[family], family) for family in available() if family != own]
    nudged = [Rounding(f"every module's output nudged by up to {NUDGE_ULPS} float32 ulps ({len(NUDGES)} draws)", own,
                       seed) for seed in NUDGES]
    return families + nudged


def replayed(call: RecipeCall, rounding: Rounding, pool: WorkerPool, settings: Mapping) -> dict:
    """The replay under one rounding: in `pool` where it computes with the recording's kernels, else in a pool of one
    recipe process with the family's (started for it, and stopped)."""
    if rounding.kernels == settings.get("RECIPE_KERNELS", "native"):
        return run_admitted(pool, call).result
    other = WorkerPool(size=1, timeout=float(settings.get("RECIPE_TIMEOUT", 120.0)),
                       torch_threads=int(settings.get("RECIPE_TORCH_THREADS", 1)),
                       seed=int(settings.get("RECIPE_SEED", 0)), kernels=rounding.kernels)
    try:
        return run_admitted(other, call).result
    finally:
        other.shutdown()


def measure(manifest: dict, recipe_dir, context: dict, pool: WorkerPool, settings: Mapping) -> dict:
    """Write into every recorded item (and every recorded process) of `manifest`'s cases its envelope, and return how
    they were measured (the manifest's experiment.rounding)."""
    floor = tolerance_for(manifest)
    cases = manifest["experiment"]["cases"]
    states = recorded_states(manifest)
    own = settings.get("RECIPE_KERNELS", "native")
    if states:  # each step from the state the recording had there: the very computation of the free run
        again = run_admitted(pool, RecipeCall.replay(recipe_dir, context, states)).result["stepwise"]
        for case in (c for c in cases if c["id"] in states):
            compared = compare_case(case, again["cases"].get(case["id"]), floor)
            wrong = next((v for v in compared["values"] if v["status"] != "passed"), None)
            if wrong is not None:
                raise MeasurementError(f"case {case['id']!r}: replayed step by step from its recorded states, "
                                       f"{wrong['kind']} {wrong['key']!r} differs from the free run: step_state must "
                                       "be called with the state that enters each step, at the top of the step")
    runs = [(r, replayed(RecipeCall.replay(recipe_dir, context, states, r.nudge), r, pool, settings))
            for r in roundings(own)]
    for case in cases:
        stepped = "steps" in case
        for _, group, field in ITEMS:
            for item in case.get(group, []):
                item[ENVELOPE] = _envelope(case, group, item, field, [run["cases"] for _, run in runs], floor)
                if stepped:
                    item[STEP_ENVELOPE] = _envelope(case, group, item, field,
                                                    [run["stepwise"]["cases"] for _, run in runs], floor)
        for process in case.get("steps", []):
            for where, field in (("steps", ENVELOPE), ("stepwise", STEP_ENVELOPE)):
                found = [_process(run, where, case["id"], process["key"]) for _, run in runs]
                process[field] = _fitted(_flat(process["states"]), [_flat(f) if f is not None else None for f in found],
                                         floor, f"case {case['id']!r}: the states of {process['key']!r}")
    return {"factor": FACTOR, "measuredBy": list(dict.fromkeys(r.name for r, _ in runs))}


def _process(run: dict, where: str, case_id: str, key: str) -> list | None:
    part = run.get(where) or {}
    steps = part.get("steps", part) if where == "stepwise" else part
    return ((steps.get(case_id) or {}).get(key) or {}).get("states")


def _flat(rows: list[list[float]]) -> list[float]:
    return [x for row in rows for x in row]


def _envelope(case: dict, group: str, item: dict, field: str, replays: list[dict], floor: Tolerance) -> dict:
    """An item's envelope from its values in each replay (by case id)."""
    found = []
    for cases in replays:
        match = next((i for i in (cases.get(case["id"]) or {}).get(group, []) if i.get("key") == item["key"]), None)
        found.append(None if match is None else match[field])
    return _fitted(item[field], found, floor, f"case {case['id']!r}: {group} {item['key']!r}")


def _fitted(values, found: list, floor: Tolerance, what: str) -> dict:
    if any(f is None for f in found):
        raise MeasurementError(f"{what}: a replay under another rounding did not make it at all")
    moved = movement(values, found)
    envelope = fit(values, moved, floor.rtol, floor.atol)
    if envelope["moved"] == float("inf"):
        raise MeasurementError(f"{what}: another rounding changes it beyond any tolerance (another shape, NaN, or "
                               "a path taken otherwise at a near tie): it cannot be checked on another machine")
    return envelope
