"""Value-by-value comparison rules, on small hand-made recordings."""

import copy
import math

from app.domain.compare import (
    FLOAT32_ATOL,
    FLOAT32_RTOL,
    compare_case,
    compare_replay,
    compare_values,
    tolerance_for,
)

from .conftest import bert_manifest

TOL = tolerance_for({"experiment": {}})


def test_default_tolerance_is_float32s():
    assert (TOL.rtol, TOL.atol) == (FLOAT32_RTOL, FLOAT32_ATOL) == (1.3e-6, 1e-5)


def test_manifest_tolerance_wins():
    tol = tolerance_for({"experiment": {"tolerance": {"rtol": 0.1, "atol": 0.2}}})
    assert (tol.rtol, tol.atol, tol.source) == (0.1, 0.2, "manifest")


def test_within_tolerance_passes_and_reports_the_worst_element():
    result = compare_values("m", "m", "matrix", [[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.000004]], TOL)
    assert result["status"] == "passed"
    assert result["worst_index"] == [1, 1]
    assert math.isclose(result["max_abs_diff"], 4e-6, rel_tol=1e-3)
    assert math.isclose(result["max_rel_diff"], 1e-6, rel_tol=1e-3)
    # Each element's share of its own allowance, computed here so that no page applies the rule again.
    assert result["allowance_ratio"][0] == [0.0, 0.0]
    assert math.isclose(result["allowance_ratio"][1][1], 4e-6 / (FLOAT32_ATOL + FLOAT32_RTOL * 4.0), rel_tol=1e-3)
    assert result["worst_ratio"] == max(max(row) for row in result["allowance_ratio"])


def test_just_past_tolerance_fails_on_that_element():
    allowed = FLOAT32_ATOL + FLOAT32_RTOL * 0.5
    result = compare_values("v", "v", "vector", [0.1, 0.5, 0.2], [0.1, 0.5 + allowed * 1.01, 0.2], TOL)
    assert result["status"] == "failed"
    assert result["worst_index"] == [1]
    assert result["failing_elements"] == 1


def test_shape_mismatch_nan_and_missing_values_fail():
    assert compare_values("v", "v", "vector", [1, 2], [1, 2, 3], TOL)["status"] == "failed"
    nan = compare_values("v", "v", "vector", [1.0, 2.0], [1.0, float("nan")], TOL)
    assert nan["status"] == "failed" and nan["max_abs_diff"] is None
    assert compare_values("x", "x", "metric", 1.0, None, TOL)["status"] == "failed"


def test_zero_recorded_value_has_infinite_relative_error_only_when_it_moved():
    assert compare_values("v", "v", "vector", [0.0], [0.0], TOL)["max_rel_diff"] == 0.0
    moved = compare_values("v", "v", "vector", [0.0], [1e-9], TOL)
    assert moved["max_rel_diff"] is None  # infinite, which JSON cannot carry: said as null
    assert moved["max_abs_diff"] == 1e-9 and moved["status"] == "passed"


def test_case_is_matched_by_key_not_position_nor_label():
    recorded = {"id": "c", "label": "C", "matrices": [], "vectors": [
        {"key": "a", "label": "A", "values": [1.0]}, {"key": "b", "label": "B", "values": [2.0]}], "metrics": []}
    replayed = {"vectors": [{"key": "b", "label": "renamed", "values": [2.0]}, {"key": "a", "values": [1.0]}]}
    assert compare_case(recorded, replayed, TOL)["status"] == "passed"
    relabelled = {"vectors": [{"key": "x", "label": "A", "values": [1.0]}, {"key": "b", "values": [2.0]}]}
    assert compare_case(recorded, relabelled, TOL)["status"] == "failed"
    assert compare_case(recorded, None, TOL)["status"] == "failed"


def test_a_case_judges_each_value_as_if_it_were_alone():
    """A case's values are compared in one pass; no verdict, count or worst element leaks into a neighbour."""
    recorded = {"id": "c", "label": "C",
                "matrices": [{"key": "m", "label": "M", "values": [[1.0, 2.0], [3.0, 4.0]]}],
                "vectors": [{"key": "v", "label": "V", "values": [0.5, 0.0, -2.0]},
                            {"key": "w", "label": "W", "values": [1.0, 2.0]},
                            {"key": "u", "label": "U", "values": [7.0]}],
                "metrics": [{"key": "loss", "label": "Loss", "value": 2.5}]}
    replayed = {"matrices": [{"key": "m", "values": [[1.0, 2.1], [3.0, 4.000001]]}],
                "vectors": [{"key": "v", "values": [float("nan"), 0.0, float("inf")]},
                            {"key": "w", "values": [1.0, 2.0, 3.0]},
                            {"key": "u", "values": [7.0]}],
                "metrics": [{"key": "loss", "value": 2.5 + 1e-6}]}
    together = compare_case(recorded, replayed, TOL)["values"]
    matrix = recorded["matrices"][0]["values"], replayed["matrices"][0]["values"]
    alone = [compare_values("m", "M", "matrix", *matrix, TOL),
             *(compare_values(r["key"], r["label"], "vector", r["values"], p["values"], TOL)
               for r, p in zip(recorded["vectors"], replayed["vectors"], strict=True)),
             compare_values("loss", "Loss", "metric", 2.5, 2.5 + 1e-6, TOL)]
    assert together == alone
    assert [v["status"] for v in together] == ["failed", "failed", "failed", "passed", "passed"]
    assert (together[0]["worst_index"], together[0]["failing_elements"]) == ([0, 1], 1)
    assert (together[1]["worst_index"], together[1]["failing_elements"], together[1]["max_abs_diff"]) == ([0], 2, None)
    assert together[1]["allowance_ratio"] == [1e300, 0.0, 1e300]
    assert together[3]["max_abs_diff"] == 0.0 and together[4]["worst_index"] == []


def test_one_changed_cell_fails_exactly_that_case_and_matrix():
    manifest = bert_manifest()
    honest = {"cases": {c["id"]: copy.deepcopy(c) for c in manifest["experiment"]["cases"]},
              "checks": [{"name": n, "passed": True} for n in manifest["provenance"]["numericalChecks"]]}
    assert compare_replay(manifest, honest)["status"] == "passed"
    manifest["experiment"]["cases"][1]["matrices"][0]["values"][3][4] += 1e-3
    report = compare_replay(manifest, honest)
    assert report["status"] == "failed"
    failed = [(c["id"], v["label"], v["worst_index"]) for c in report["cases"] for v in c["values"]
              if v["status"] == "failed"]
    assert failed == [("mask-b", "Bidirectional attention · head 0", [3, 4])]
    assert report["summary"]["cases_failed"] == 1


def test_missing_or_failing_check_fails_the_report():
    manifest = bert_manifest()
    cases = {c["id"]: c for c in manifest["experiment"]["cases"]}
    names = manifest["provenance"]["numericalChecks"]
    report = compare_replay(manifest, {"cases": cases, "checks": [{"name": names[0], "passed": False}]})
    assert report["status"] == "failed"
    assert [c["status"] for c in report["checks"]] == ["failed"] * 4
    assert report["checks"][1]["message"] == "the recipe did not run this check"
