"""Every model of the catalog that records cases: its recording verifies through the API under the machine's own
kernels and under the portable ones (how this suite plays a reader's other processor), and one recorded value moved
by 1e-3 of itself plus 1e-3 fails exactly its case and its item; a recorded state of an iterated process moved so
fails at the step that made it. One test per model and kernel family, so that a new model is checked with no edit
here."""

import json
import shutil
import time

import pytest

from app.domain.compare import ENVELOPE, tolerance_for
from app.domain.envelopes import TELLS_APART, tells_apart
from app.domain.schema import ITEMS
from app.services.config import PROJECT_ROOT, TestConfig

from .conftest import CATALOG_SLUGS, eventually


def stored(slug: str) -> bytes:
    return (PROJECT_ROOT / "manifests" / slug / "manifest.json").read_bytes()


RECORDED = [slug for slug in CATALOG_SLUGS
            if any(case.get("matrices") for case in json.loads(stored(slug))["experiment"]["cases"])]
STEPPED = [slug for slug in RECORDED
           if any(case.get("steps") for case in json.loads(stored(slug))["experiment"]["cases"])]


def moved(value: float) -> float:
    """A value moved as no rounding should move it: by TELLS_APART of itself plus TELLS_APART."""
    return value + TELLS_APART * (1 + abs(value))


def copied_app(make_app, slug: str, tmp_path, kernels: str):
    """An app serving a copy of the model's recording and recipe (so that a test may edit the recording), its recipe
    processes on `kernels`."""
    manifest_file = tmp_path / "manifests" / slug / "manifest.json"
    manifest_file.parent.mkdir(parents=True)
    manifest_file.write_bytes(stored(slug))
    shutil.copytree(PROJECT_ROOT / "recipes" / slug, tmp_path / "recipes" / slug,
                    ignore=shutil.ignore_patterns("__pycache__"))
    app = make_app(type("Copied", (TestConfig,), {"MANIFESTS_DIR": str(tmp_path / "manifests"),
                                                    "RECIPES_DIR": str(tmp_path / "recipes"),
                                                    "CATALOG_RELOAD_SECONDS": 0.01, "RECIPE_KERNELS": kernels}))
    return app, manifest_file


def verified(app, slug: str) -> dict:
    """The report of POST /api/models/<slug>/verifications, polled to its end."""
    client = app.test_client()
    answer = client.post(f"/api/models/{slug}/verifications")
    if answer.status_code == 200:
        return answer.get_json()
    assert answer.status_code == 202, answer.get_json()
    job = eventually(lambda: client.get(answer.headers["Location"]).get_json(), lambda job: job["state"] == "done",
                     seconds=600, every=0.1)
    return job["report"]


def off(report: dict) -> list[tuple[str, str]]:
    return [(c["id"], v["key"]) for c in report["cases"] for v in c["values"] if v["status"] != "passed"] + \
        [(c["id"], s["key"]) for c in report["cases"] for s in c.get("steps", []) if s["status"] != "passed"]


@pytest.mark.parametrize("kernels", ["native", "portable"])
@pytest.mark.parametrize("slug", RECORDED)
def test_the_recording_verifies_and_one_moved_value_fails_exactly_its_case_and_item(make_app, slug, kernels, tmp_path):
    app, manifest_file = copied_app(make_app, slug, tmp_path, kernels)
    with app.app_context():
        from app.services.extensions import models

        as_recorded = verified(app, slug)
        assert as_recorded["status"] == "passed", off(as_recorded)
        assert as_recorded["environment"]["kernels"] == kernels
        if kernels != "native":
            return
        # The first matrix (of the first case that has one) that rounding does not amplify, by its key as the
        # catalog serves it (the seed's items get theirs from recipe.toml), moved at [0][0] in the file itself.
        served = models.get(slug).manifest
        floor = {"rtol": tolerance_for(served).rtol, "atol": tolerance_for(served).atol}
        index, j, case, key = next((i, j, c, m["key"]) for i, c in enumerate(served["experiment"]["cases"])
                                   for j, m in enumerate(c.get("matrices", []))
                                   if tells_apart(m.get(ENVELOPE, floor)))
        manifest = json.loads(stored(slug))
        matrix = manifest["experiment"]["cases"][index]["matrices"][j]
        matrix["values"][0][0] = moved(matrix["values"][0][0])
        manifest_file.write_text(json.dumps(manifest))
        time.sleep(0.05)  # past the catalog's reload interval: the next look finds the changed file
        moved_report = verified(app, slug)
    assert moved_report["status"] == "failed" and off(moved_report) == [(case["id"], key)]
    failed = next(v for c in moved_report["cases"] for v in c["values"] if v["status"] != "passed")
    assert failed["worst_index"] == [0, 0] and failed["failing_elements"] == 1


@pytest.mark.parametrize("slug", STEPPED)
def test_a_moved_recorded_state_fails_at_the_step_that_made_it(make_app, slug, tmp_path):
    """The middle state of the first iterated process, moved as no rounding moves it: the step-by-step replay names
    the step before it as the first that left its bound."""
    app, manifest_file = copied_app(make_app, slug, tmp_path, "native")
    manifest = json.loads(stored(slug))
    case = next(c for c in manifest["experiment"]["cases"] if c.get("steps"))
    process = case["steps"][0]
    row = len(process["states"]) // 2
    process["states"][row][0] = moved(process["states"][row][0])
    manifest_file.write_text(json.dumps(manifest))
    with app.app_context():
        report = verified(app, slug)
    found = next(c for c in report["cases"] if c["id"] == case["id"])
    steps = next(s for s in found["steps"] if s["key"] == process["key"])
    assert report["status"] == "failed" and found["status"] == "failed"
    assert steps["status"] == "failed" and steps["first_failing"] == {"index": row, "step": process["names"][row - 1]}
    assert process["names"][row - 1] in steps["message"]
    assert all(c["status"] == "passed" for c in report["cases"] if c["id"] != case["id"])


@pytest.mark.parametrize("slug", RECORDED)
def test_every_envelope_tells_a_moved_value_apart_but_where_rounding_is_amplified(slug):
    """An envelope wider than a move of 1e-3 of a value plus 1e-3 is one whose computation amplifies rounding, and
    says so; each is measured (the largest movement seen), never narrower than float32's tolerance."""
    manifest = json.loads(stored(slug))
    floor = tolerance_for(manifest)
    for case in manifest["experiment"]["cases"]:
        items = [item for _, group, _ in ITEMS for item in case.get(group, [])] + case.get("steps", [])
        for item in items:
            for field in ("envelope", "stepEnvelope"):
                envelope = item.get(field)
                if envelope is None:
                    continue
                assert envelope["rtol"] >= floor.rtol and envelope["atol"] >= floor.atol
                assert tells_apart(envelope) or envelope["amplifies"], (case["id"], item["key"], field, envelope)
