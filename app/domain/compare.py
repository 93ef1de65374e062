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
    result: dict = {"kind": kind, "key": key, "label": label}
    if replayed is None:
        return result | {"status": "failed", "message": f"the replay produced no {kind} with the key {key!r}"}
    want = np.asarray(recorded, dtype=np.float64)
    got = np.asarray(replayed, dtype=np.float64)
    result["shape"] = list(want.shape)
    if want.shape != got.shape:
        message = f"replayed shape {list(got.shape)} differs from recorded {list(want.shape)}"
        return result | {"status": "failed", "message": message}
    diff = np.abs(got - want)
    allowed = tol.allowance(want)
    excess = diff - allowed  # <= 0 within tolerance (exact in floating point: a - b <= 0 iff a <= b)
    finite = bool(np.isfinite(got).all())
    with np.errstate(divide="ignore", invalid="ignore"):
        # x / 0 is inf (a difference from a recorded zero); no difference is 0 whatever the divisor
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        ratio = np.where(diff == 0, 0.0, diff / allowed)  # each element's |Δ| as a share of its allowance
    if finite:
        # The worst element is the one furthest past (or closest to) its own allowance.
        worst = np.unravel_index(int(np.argmax(excess)), want.shape)
        failing = int(np.count_nonzero(excess > 0))
        result |= {"status": "passed" if failing == 0 else "failed",
                   "max_abs_diff": float(diff.max()), "max_rel_diff": json_safe(float(rel.max())),
                   "worst_index": [int(i) for i in worst], "recorded_at_worst": float(want[worst]),
                   "replayed_at_worst": float(got[worst]), "failing_elements": failing,
                   "worst_ratio": json_safe(float(ratio.max()))}
    else:  # the replay produced NaN or infinity: every such element fails
        worst = np.unravel_index(int(np.argmax(np.nan_to_num(excess, nan=np.inf))), want.shape)
        ratio = np.where(np.isfinite(diff), ratio, np.inf)
        result |= {"status": "failed", "max_abs_diff": None, "max_rel_diff": None,
                   "worst_index": [int(i) for i in worst], "recorded_at_worst": float(want[worst]),
                   "replayed_at_worst": json_safe(float(got[worst])),
                   "failing_elements": int(np.count_nonzero(~(excess <= 0))), "worst_ratio": None}
    # The page draws the ratios as they are (at most 1 is within tolerance), so the rule is applied here only.
    if kind != "metric":
        result["abs_diff"] = diff.tolist() if finite else json_safe(diff.tolist())  # per-cell deviation marks
        result["allowance_ratio"] = np.minimum(ratio, 1e300).tolist()  # no NaN is left; infinity as 1e300
    return result


def compare_case(recorded: dict, replayed: dict | None, tol: Tolerance) -> dict:
    """Every recorded item of a case, matched to the replay by kind and key."""
    replayed = replayed or {}
    values = []
    for kind, group, field in ITEMS:
        produced = {item.get("key"): item[field] for item in replayed.get(group, [])}
        for item in recorded.get(group, []):
            values.append(compare_values(item["key"], item["label"], kind, item[field], produced.get(item["key"]), tol))
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
