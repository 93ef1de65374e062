"""A recipe's replay as verification and the recorder run it: every case run freely, then each case whose recorded
states are given run again step by step from them; and, for the recorder's measurement of how far rounding moves
each recorded value, the same replay with every module's output nudged by a few float32 ulps.

Runs in a recipe process (it imports torch). The nudge goes through torch's public global forward hook, so that a
recipe needs nothing of its own to be measured.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

from .process import manual_seed

# How far a nudge moves a module's output: up to this many units in the last place of float32, towards zero (so
# that a probability stays within [0, 1], a sign and a zero stay as they are). A sum whose terms another processor
# adds in another order rounds differently by about as much.
NUDGE_ULPS = 4
FLOAT32_ULP = 2.0**-23


def replay(replay_of: Callable[..., dict], states: dict, nudge: int | None, seed: int, torch: ModuleType,
           context: dict) -> dict:
    """run.py's replay() of every case and check, then each case of `states` (by case id, by process: the recorded
    states that entered its steps) replayed alone, step by step from them, each from the seed as the whole replay
    starts: {"cases", "checks", "steps"?, "stepwise"?: {"cases": {id: case}, "steps": {id: processes}}}."""
    from recipekit import replay as kit  # torch's: this module is named by the web tier too (NUDGE_ULPS)

    with nudged(torch, nudge):
        result = replay_of(**context)
        if states:
            stepwise: dict = {"cases": {}, "steps": {}}
            with kit.stepwise(states):
                for case_id in states:
                    manual_seed(torch, seed)
                    alone = replay_of(case=case_id, **context)
                    stepwise["cases"][case_id] = alone["cases"][case_id]
                    stepwise["steps"][case_id] = alone.get("steps", {}).get(case_id, {})
            result["stepwise"] = stepwise
    return result


@contextmanager
def nudged(torch: ModuleType, seed: int | None) -> Iterator[None]:
    """While inside, every floating-point tensor a module outputs is scaled by 1 − u·NUDGE_ULPS·ulp, u drawn uniformly
    in [0, 1) from a generator of its own seeded with `seed` (the recipe's own draws are untouched); None: no nudge."""
    if seed is None:
        yield
        return
    generator = torch.Generator().manual_seed(seed)

    def nudge(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            shrink = torch.rand(value.shape, generator=generator, dtype=torch.float64) * (NUDGE_ULPS * FLOAT32_ULP)
            return (value.double() * (1 - shrink)).to(value.dtype)
        if isinstance(value, tuple) and not hasattr(value, "_fields"):  # a named tuple is left as it is
            return tuple(nudge(part) for part in value)
        return value

    handle = torch.nn.modules.module.register_module_forward_hook(lambda _module, _args, output: nudge(output))
    try:
        yield
    finally:
        handle.remove()
