"""Value-by-value comparison of a replay against the recorded experiment (numpy only, no torch)."""

import math
from dataclasses import dataclass

import numpy as np

from .schema import ITEMS

# torch.testing.assert_close's defaults for float32: the recipes compute in float32, so checking them
# at float64 tolerances would fail on rounding alone.
FLOAT32_RTOL = 1.3e-6
FLOAT32_ATOL = 1e-5


@dataclass(frozen=True)
class Tolerance:
    """The rule one recorded item is held to: |replayed − recorded| <= atol + rtol·|recorded|. `source` says where
    it comes from: float32's defaults, the manifest's own, or the item's envelope (envelopes.py), which carries the
    largest movement the recorder measured (`moved`) and whether rounding alone moved it past float32's tolerance
    (`amplifies`)."""

    rtol: float
    atol: float
    source: str
    moved: float | None = None
    amplifies: bool = False
    widened: bool = False  # wider than the floor it was made over

    def allowance(self, recorded):
        """How far a replayed value may be from `recorded` (a number or an array): atol + rtol * |recorded|."""
        return self.atol + self.rtol * abs(recorded)

    def as_dict(self) -> dict:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "source": self.source,
            "rule": "|replayed - recorded| <= atol + rtol * |recorded|, element by element, in float64",
        }

    def for_field(self, item: dict, field: str) -> "Tolerance":
        """The tolerance of a recorded item (or a recorded process): its envelope `field` ("envelope" for a free run,
        "stepEnvelope" step by step) where the recording measured one, else this one (the floor)."""
        envelope = item.get(field)
        if not envelope:
            return self
        return Tolerance(max(envelope["rtol"], self.rtol), max(envelope["atol"], self.atol),
                         "step envelope" if field == STEP_ENVELOPE else "envelope", envelope["moved"],
                         envelope["amplifies"], envelope["rtol"] > self.rtol or envelope["atol"] > self.atol)

    def described(self, recorded) -> dict:
        """The tolerance as a value's report gives it, and, for an envelope, what it means in words."""
        said = {"rtol": self.rtol, "atol": self.atol, "source": self.source, "widened": self.widened}
        if self.moved is None:
            return said
        allowed = self.allowance(float(np.max(np.abs(np.asarray(recorded, dtype=np.float64)), initial=0.0)))
        words = ("its computation amplifies rounding: " if self.amplifies else "") + \
            (f"other roundings (other kernels, nudged outputs) moved it by up to {self.moved:.2g} when it was "
             f"recorded; allowed up to {allowed:.2g}" if self.moved else
             "no other rounding moved it when it was recorded")
        return said | {"moved": self.moved, "amplifies": self.amplifies, "note": words}


ENVELOPE, STEP_ENVELOPE = "envelope", "stepEnvelope"  # where a recorded item keeps each of its envelopes


def tolerance_for(manifest: dict) -> Tolerance:
    """The manifest's own tolerance where it states one, else float32's: the floor of every item's envelope."""
    stated = manifest["experiment"].get("tolerance")
    if stated:
        return Tolerance(float(stated["rtol"]), float(stated["atol"]), "manifest")
    return Tolerance(FLOAT32_RTOL, FLOAT32_ATOL, "torch.testing float32 defaults")


def json_safe(value):
    """NaN and infinity as None (a relative difference from a recorded zero, a replay that produced them):
    JSON cannot carry them, and the app's one encoder refuses them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def compare_values(key: str, label: str, kind: str, recorded, replayed, tol: Tolerance) -> dict:
    """One recorded matrix, vector or metric against its replay."""
    return compare_items([(key, label, kind, recorded, replayed, tol)])[0]


def compare_items(items: list[tuple]) -> list[dict]:
    """Recorded values against their replays, each item (key, label, kind, recorded, replayed, tolerance). The rule
    is applied element by element, so it runs once over every value laid end to end: a case's values are a few
    dozen elements each, and numpy's cost per call, not per element, was most of a verification's comparison."""
    results: list[dict] = []
    wants, gots, placed, rtols, atols = [], [], [], [], []  # the values of matching shapes, where each result goes
    for key, label, kind, recorded, replayed, tol in items:
        result: dict = {"kind": kind, "key": key, "label": label, "tolerance": tol.described(recorded)}
        results.append(result)
        if replayed is None:
            result |= {"status": "failed", "message": f"the replay produced no {kind} with the key {key!r}"}
            continue
        want = np.asarray(recorded, dtype=np.float64)
        got = np.asarray(replayed, dtype=np.float64)
        result["shape"] = list(want.shape)
        if want.shape != got.shape:
            message = f"replayed shape {list(got.shape)} differs from recorded {list(want.shape)}"
            result |= {"status": "failed", "message": message}
            continue
        wants.append(want.ravel())
        gots.append(got.ravel())
        rtols.append(np.full(want.size, tol.rtol))
        atols.append(np.full(want.size, tol.atol))
        placed.append(result)
    if not placed:
        return results
    want, got = np.concatenate(wants), np.concatenate(gots)
    diff = np.abs(got - want)
    allowed = np.concatenate(atols) + np.concatenate(rtols) * np.abs(want)
    excess = diff - allowed  # <= 0 within tolerance (exact in floating point: a - b <= 0 iff a <= b)
    with np.errstate(divide="ignore", invalid="ignore"):
        # x / 0 is inf (a difference from a recorded zero); no difference is 0 whatever the divisor
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        ratio = np.where(diff == 0, 0.0, diff / allowed)  # each element's |Δ| as a share of its allowance
    ratio = np.where(np.isfinite(diff), ratio, np.inf)  # a NaN or infinite replay: infinitely far from it
    failing = ~(excess <= 0)  # NaN compares false: such an element fails
    drawn = np.minimum(ratio, 1e300)  # the ratios as the page draws them: no NaN is left, infinity as 1e300
    ends = np.cumsum([part.size for part in wants])
    starts = np.concatenate(([0], ends[:-1]))
    per_value = zip(placed, starts.tolist(), ends.tolist(), np.add.reduceat(~np.isfinite(got), starts).tolist(),
                    np.add.reduceat(failing, starts).tolist(), np.maximum.reduceat(diff, starts).tolist(),
                    np.maximum.reduceat(rel, starts).tolist(), np.maximum.reduceat(ratio, starts).tolist(), strict=True)
    for result, start, end, nonfinite, failed, max_diff, max_rel, max_ratio in per_value:
        finite = nonfinite == 0
        shape = result["shape"]
        # The worst element is the one furthest past (or closest to) its own allowance; NaN counts as furthest.
        worst = start + int((excess[start:end] if finite else np.nan_to_num(excess[start:end], nan=np.inf)).argmax())
        result |= {"status": "passed" if finite and failed == 0 else "failed",
                   "max_abs_diff": max_diff if finite else None,
                   "max_rel_diff": json_safe(max_rel) if finite else None,
                   "worst_index": [int(i) for i in np.unravel_index(worst - start, shape)],
                   "recorded_at_worst": float(want[worst]), "replayed_at_worst": json_safe(float(got[worst])),
                   "failing_elements": failed, "worst_ratio": json_safe(max_ratio) if finite else None}
        # The page draws the ratios as they are (at most 1 is within tolerance): the rule is applied here only.
        if result["kind"] != "metric":
            cells = diff[start:end].reshape(shape).tolist()
            result["abs_diff"] = cells if finite else json_safe(cells)  # per-cell deviation marks
            result["allowance_ratio"] = drawn[start:end].reshape(shape).tolist()
    return results


def _items(recorded: dict, replayed: dict, floor: Tolerance, field: str) -> list[tuple]:
    """Every recorded item of a case with its replay (matched by kind and key) and its tolerance (`field`'s envelope
    over `floor`)."""
    items = []
    for kind, group, values in ITEMS:
        produced = {item.get("key"): item[values] for item in replayed.get(group, [])}
        items += [(item["key"], item["label"], kind, item[values], produced.get(item["key"]),
                   floor.for_field(item, field)) for item in recorded.get(group, [])]
    return items


# The part of a value's report the step-by-step comparison gives beside the free run's.
STEPWISE_KEYS = ("status", "message", "max_abs_diff", "worst_index", "failing_elements", "worst_ratio", "tolerance")


def compare_steps(recorded: dict, replayed: dict | None, floor: Tolerance) -> dict:
    """One iterated process of a case replayed step by step from its recorded states: the state each step passed on
    (row k + 1, made from recorded row k; row 0 the starting state) against the recorded one, each row by the
    process's step envelope. Names the first step that left its bound."""
    states, names = recorded["states"], recorded["names"]
    tol = floor.for_field(recorded, STEP_ENVELOPE)
    largest = max((abs(x) for row in states for x in row), default=0.0)
    report: dict = {"key": recorded["key"], "steps": len(states), "tolerance": tol.described(largest)}
    got = (replayed or {}).get("states", [])
    rows = compare_items([(str(k), str(k), "vector", want, got[k] if k < len(got) else None, tol)
                          for k, want in enumerate(states)])
    failing = [k for k, row in enumerate(rows) if row["status"] != "passed"]
    differences = [row["max_abs_diff"] for row in rows if row.get("max_abs_diff") is not None]
    report |= {"status": "failed" if failing or not replayed else "passed", "failing_steps": len(failing),
               "max_abs_diff": max(differences, default=None),
               "worst_ratio": max((row["worst_ratio"] for row in rows if row.get("worst_ratio") is not None),
                                  default=None)}
    if not replayed:
        return report | {"message": f"the replay did not run {recorded['key']} step by step"}
    if failing:
        k = failing[0]
        made_by = "the starting state" if k == 0 else names[k - 1]
        off = rows[k].get("message") or f"off by up to {rows[k]['max_abs_diff']:.3g}"
        report |= {"first_failing": {"index": k, "step": made_by},
                   "message": f"{recorded['key']}: the first step that left its bound is {made_by}: the state it "
                              f"passed on is {off}"}
    elif len(got) != len(states):
        report |= {"status": "failed", "message": f"{recorded['key']}: the replay took {len(got)} steps, the "
                                                  f"recording {len(states)}"}
    else:
        report["note"] = (f"each of the {len(states)} steps of {recorded['key']} was replayed from its recorded state "
                          "and passed on the recorded next state within its tolerance")
    return report


def compare_case(recorded: dict, replayed: dict | None, tol: Tolerance, stepwise: dict | None = None) -> dict:
    """Every recorded item of a case, matched to the replay by kind and key, each within its envelope. A case whose
    recording keeps the states of an iterated process (`steps`) is also compared step by step where `stepwise` is
    given (its replay from the recorded states: {"case", "steps"}; empty: it was asked for and did not come), and
    then passes only where both hold; None compares the free run alone (a lab's live run)."""
    replayed = replayed or {}
    values = compare_items(_items(recorded, replayed, tol, ENVELOPE))
    passed = bool(replayed) and all(v["status"] == "passed" for v in values)
    case = {"id": recorded["id"], "label": recorded["label"]}
    if not replayed:
        case["message"] = "the recipe did not replay this case"
    processes = recorded.get("steps", [])
    if processes and stepwise is not None:
        step_case = stepwise.get("case") or {}
        for value, step_value in zip(values, compare_items(_items(recorded, step_case, tol, STEP_ENVELOPE)),
                                     strict=True):
            value["stepwise"] = {k: step_value[k] for k in STEPWISE_KEYS if k in step_value}
            if step_value["status"] != "passed":  # a value holds where it holds both ways
                value["status"] = "failed"
        steps = [compare_steps(process, (stepwise.get("steps") or {}).get(process["key"]), tol)
                 for process in processes]
        passed = bool(replayed) and bool(step_case) and all(v["status"] == "passed" for v in values) \
            and all(s["status"] == "passed" for s in steps)
        case["steps"] = steps
    return case | {"status": "passed" if passed else "failed", "values": values}


def compare_checks(recorded: list[str], replayed: list[dict], failed: list[str] = ()) -> list[dict]:
    """The recorded numerical checks by name, then any further check the recipe ran. A check the recording says
    `failed` (a variant's: a network trained on circles does not compute XOR) holds where it fails again."""
    by_name = {check["name"]: check for check in replayed}
    results = []
    for name in recorded:
        check = by_name.pop(name, None)
        if check is None:
            results.append({"name": name, "status": "failed", "message": "the recipe did not run this check"})
        elif name in failed:
            results.append({"name": name, "status": "failed" if check["passed"] else "passed", "recorded_failed": True,
                            "message": "failed when it was recorded, and "
                                       + ("passes now: not what was recorded" if check["passed"] else "fails again"),
                            "detail": json_safe(check.get("detail", {}))})
        else:
            results.append({"name": name, "status": "passed" if check["passed"] else "failed",
                             "detail": json_safe(check.get("detail", {}))})
    results += [{"name": c["name"], "status": "passed" if c["passed"] else "failed",
                 "detail": json_safe(c.get("detail", {})), "recorded": False} for c in by_name.values()]
    return results


def recorded_states(manifest: dict) -> dict[str, dict[str, list[list[float]]]]:
    """What a replay needs to run the recording's iterated processes step by step: by case id, by process, the
    recorded states that entered its steps."""
    return {case["id"]: {process["key"]: process["states"] for process in case["steps"]}
            for case in manifest["experiment"]["cases"] if case.get("steps")}


def compare_replay(manifest: dict, replay: dict) -> dict:
    """The comparison part of a verification report: status, tolerance (the floor of every envelope), cases, checks
    and counts. A case that keeps the states of an iterated process is compared step by step too, from the replay's
    `stepwise` part."""
    tol = tolerance_for(manifest)
    stepwise = replay.get("stepwise") or {}
    cases = [compare_case(c, replay["cases"].get(c["id"]), tol,
                          {"case": stepwise.get("cases", {}).get(c["id"]),
                           "steps": stepwise.get("steps", {}).get(c["id"])} if c.get("steps") else None)
             for c in manifest["experiment"]["cases"]]
    provenance = manifest["provenance"]
    checks = compare_checks(provenance.get("numericalChecks", []), replay["checks"], provenance.get("failedChecks", []))
    values = [v for case in cases for v in case["values"]]
    elements = sum(math.prod(v.get("shape") or [1]) for v in values)
    passed = all(c["status"] == "passed" for c in cases) and all(c["status"] == "passed" for c in checks)
    return {
        "status": "passed" if passed else "failed",
        "tolerance": tol.as_dict(),
        "summary": {
            "cases": len(cases),
            "cases_failed": sum(c["status"] != "passed" for c in cases),
            "values": len(values),
            "values_failed": sum(v["status"] != "passed" for v in values),
            "values_widened": sum(v["tolerance"]["widened"] for v in values),
            "elements": elements,
            "steps_checked": sum(s["steps"] for c in cases for s in c.get("steps", [])),
            "checks": len(checks),
            "checks_failed": sum(c["status"] != "passed" for c in checks),
        },
        "cases": cases,
        "checks": checks,
    }


def case_lines(case: dict, every: bool) -> list[str]:
    """A compared case as a terminal shows it (`flask verify`, `tensorviz verify`): its verdict, its values (`every`
    one, or those that failed or were allowed more than float32's tolerance), each with what it was allowed and
    why, and each iterated process checked step by step."""
    held = sum(v["status"] == "passed" for v in case["values"])
    lines = [f"case {case['id']} ({case['label']}): {case['status']}, {held} of {len(case['values'])} values"]
    for v in case["values"]:
        tol, step = v["tolerance"], v.get("stepwise")
        widened = tol["widened"]
        failed = v["status"] != "passed"
        if not (every or failed or widened):
            continue
        off = v.get("message") or (f"max |diff| {v['max_abs_diff']:.3g} at {v['worst_index']}" +
                                   (f", {v['failing_elements']} elements outside the tolerance" if failed else ""))
        lines.append(f"  {'FAILED' if failed else 'passed'} {case['id']} / {v['key']} ({v['label']}): {off}" +
                     (f"; {tol['note']}" if widened and "note" in tol else ""))
        if step is not None and step["status"] != "passed":
            said = step.get("message") or f"max |diff| {step['max_abs_diff']:.3g} at {step['worst_index']}"
            lines.append(f"      step by step: {said}")
    for process in case.get("steps", []):
        lines.append(f"  {process['status'].upper() if process['status'] != 'passed' else 'passed'} {case['id']} / "
                     f"{process['key']}, step by step: {process.get('note') or process.get('message')}")
    return lines
