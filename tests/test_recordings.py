"""Every model of the catalog that records cases: its recording verifies, and one recorded value moved by 0.01
fails exactly its case and its item. One test per model, so that a new model is checked with no edit here."""

import json
import shutil
import time

import pytest

from app import create_app
from app.services.config import PROJECT_ROOT, TestConfig
from app.services.parts import parts

from .conftest import CATALOG_SLUGS


def stored(slug: str) -> bytes:
    return (PROJECT_ROOT / "manifests" / slug / "manifest.json").read_bytes()


RECORDED = [slug for slug in CATALOG_SLUGS
            if any(case.get("matrices") for case in json.loads(stored(slug))["experiment"]["cases"])]


@pytest.mark.parametrize("slug", RECORDED)
def test_the_recording_verifies_and_one_moved_value_fails_exactly_its_case_and_item(slug, tmp_path):
    manifest_file = tmp_path / "manifests" / slug / "manifest.json"
    manifest_file.parent.mkdir(parents=True)
    manifest_file.write_bytes(stored(slug))
    shutil.copytree(PROJECT_ROOT / "recipes" / slug, tmp_path / "recipes" / slug,
                    ignore=shutil.ignore_patterns("__pycache__"))
    app = create_app(type("Copied", (TestConfig,), {"MANIFESTS_DIR": str(tmp_path / "manifests"),
                                                    "RECIPES_DIR": str(tmp_path / "recipes"),
                                                    "CATALOG_RELOAD_SECONDS": 0.01}))
    try:
        with app.app_context():
            from app.services.extensions import models
            from app.services.verification import verify

            as_recorded = verify(models.get(slug))
            # The first matrix of the first case that has one, by its key as the catalog serves it (the seed's
            # items get theirs from recipe.toml), moved by 0.01 at [0][0] in the file itself.
            cases = models.get(slug).manifest["experiment"]["cases"]
            index, case = next((i, c) for i, c in enumerate(cases) if c.get("matrices"))
            key = case["matrices"][0]["key"]
            manifest = json.loads(stored(slug))
            manifest["experiment"]["cases"][index]["matrices"][0]["values"][0][0] += 0.01
            manifest_file.write_text(json.dumps(manifest))
            time.sleep(0.05)  # past the catalog's reload interval: the next look finds the changed file
            moved = verify(models.get(slug))
    finally:
        parts(app).pool.shutdown()
    assert as_recorded["status"] == "passed", [(c["id"], v["key"]) for c in as_recorded["cases"]
                                               for v in c["values"] if v["status"] != "passed"]
    failed = [(c["id"], v) for c in moved["cases"] for v in c["values"] if v["status"] != "passed"]
    assert moved["status"] == "failed" and [(case_id, v["key"]) for case_id, v in failed] == [(case["id"], key)]
    assert failed[0][1]["worst_index"] == [0, 0] and failed[0][1]["failing_elements"] == 1
