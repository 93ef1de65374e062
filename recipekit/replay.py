"""run.py's replay: every recorded case and every check, or one case alone (what What if? and the training stages
run on a case), and run.py's main.

    def replay(model=None, case=None):
        model = model if model is not None else build_model()
        return cases({"zero": partial(run_case, model, 0), ...}, {CHECK: partial(check, model)}, case)

A case's function must compute the case alone exactly as it computes it among the others (seeding its own draws):
the recorder checks that each case replayed alone equals the case in the whole replay.
"""

import json
from collections.abc import Callable, Mapping

import torch


def cases(made: Mapping[str, Callable[[], dict]], checks: Mapping[str, Callable[[], dict]],
          case: str | None = None) -> dict:
    """{"cases": {id: case}, "checks": [{"name", "passed", "detail"}]}: every case and check, or with `case`
    that case alone and no check."""
    if case is not None:
        if case not in made:
            raise KeyError(f"no recorded case {case!r}; the cases are {', '.join(made)}")
        return {"cases": {case: made[case]()}, "checks": []}
    return {"cases": {case_id: make() for case_id, make in made.items()},
            "checks": [{"name": name, **check()} for name, check in checks.items()]}


def reproduced(replayed: float, trained: float, allowed: float = 0.0) -> dict:
    """A check that a figure train.py measured and stored is measured again: equal for counts (allowed 0), within
    `allowed` for a float32 mean, whose last bits depend on the order the machine's threads sum it in."""
    difference = abs(replayed - trained)
    detail = {"replayed": replayed, "at_training": trained}
    if allowed:
        detail |= {"difference": difference, "allowed": allowed}
    return {"passed": difference <= allowed, "detail": detail}


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
