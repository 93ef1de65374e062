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
    rtol: float
    atol: float
    source: str

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


def tolerance_for(manifest: dict) -> Tolerance:
    """The manifest's own tolerance where it states one, else float32's."""
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
    return compare_items([(key, label, kind, recorded, replayed)], tol)[0]


def compare_items(items: list[tuple], tol: Tolerance) -> list[dict]:
    """Recorded values against their replays, each item (key, label, kind, recorded, replayed). The rule is
    applied element by element, so it runs once over every value laid end to end: a case's values are a few
    dozen elements each, and numpy's cost per call, not per element, was most of a verification's comparison."""
    results: list[dict] = []
    wants, gots, placed = [], [], []  # the values of matching shapes, and where each one's result goes
    for key, label, kind, recorded, replayed in items:
        result: dict = {"kind": kind, "key": key, "label": label}
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
        placed.append(result)
    if not placed:
        return results
    want, got = np.concatenate(wants), np.concatenate(gots)
    diff = np.abs(got - want)
    allowed = tol.allowance(want)
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


def compare_case(recorded: dict, replayed: dict | None, tol: Tolerance) -> dict:
    """Every recorded item of a case, matched to the replay by kind and key."""
    replayed = replayed or {}
    items = []
    for kind, group, field in ITEMS:
        produced = {item.get("key"): item[field] for item in replayed.get(group, [])}
        items += [(item["key"], item["label"], kind, item[field], produced.get(item["key"]))
                  for item in recorded.get(group, [])]
    values = compare_items(items, tol)
    passed = bool(replayed) and all(v["status"] == "passed" for v in values)
    case = {"id": recorded["id"], "label": recorded["label"], "status": "passed" if passed else "failed"}
    if not replayed:
        case["message"] = "the recipe did not replay this case"
    return case | {"values": values}


def compare_checks(recorded: list[str], replayed: list[dict]) -> list[dict]:
    """The recorded numerical checks by name, then any further check the recipe ran."""
    by_name = {check["name"]: check for check in replayed}
    results = []
    for name in recorded:
        check = by_name.pop(name, None)
        if check is None:
            results.append({"name": name, "status": "failed", "message": "the recipe did not run this check"})
        else:
            results.append({"name": name, "status": "passed" if check["passed"] else "failed",
                             "detail": json_safe(check.get("detail", {}))})
    results += [{"name": c["name"], "status": "passed" if c["passed"] else "failed",
                 "detail": json_safe(c.get("detail", {})), "recorded": False} for c in by_name.values()]
    return results


def compare_replay(manifest: dict, replay: dict) -> dict:
    """The comparison part of a verification report: status, tolerance, cases, checks and counts."""
    tol = tolerance_for(manifest)
    cases = [compare_case(c, replay["cases"].get(c["id"]), tol) for c in manifest["experiment"]["cases"]]
    checks = compare_checks(manifest["provenance"].get("numericalChecks", []), replay["checks"])
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
            "elements": elements,
            "checks": len(checks),
            "checks_failed": sum(c["status"] != "passed" for c in checks),
        },
        "cases": cases,
        "checks": checks,
    }
