"""Knobs: the training settings a recipe declares ([training.knobs.<name>]), read the same way by train.py on its
own and by the server; a knob moved trains a variant into a folder of its own, deterministically."""

import json
import os
import subprocess
import sys

import pytest

from app.services.config import PROJECT_ROOT
from recipekit import knobs
from recipekit.kernels import KERNELS
from recipekit.knobs import KnobError

MLP = PROJECT_ROOT / "recipes" / "mlp"
DECLARED = {
    "rate": {"description": "learning rate", "min": 0.01, "max": 2.0, "default": 0.5, "step": 0.01},
    "width": {"description": "hidden units", "min": 1, "max": 16, "default": 2},
    "data": {"description": "the pattern", "choices": ["xor", "circles"], "default": "xor"},
}


def test_a_knob_reads_its_values_and_refuses_others_naming_itself():
    found = knobs.parse(DECLARED)
    assert found["width"].integer and not found["rate"].integer
    assert knobs.chosen(found, {}) == {"rate": 0.5, "width": 2, "data": "xor"}
    assert knobs.chosen(found, {"rate": "0.3", "width": "8", "data": "circles"}) == {
        "rate": 0.3, "width": 8, "data": "circles"}
    refused = {"rate": 3, "width": 2.5, "data": "spiral"}
    said = {"rate": "rate: 3 is out of range 0.01..2", "width": "width: 2.5 is not a whole number",
            "data": "data: 'spiral' is not one of xor, circles"}
    for name, value in refused.items():
        with pytest.raises(KnobError, match=f"^{said[name]}$"):
            knobs.chosen(found, {name: value})
    for value in ("nan", "inf", True, None, "fast", 10**400, -(10**400), "1" * 400):
        with pytest.raises(KnobError, match="^rate: "):
            knobs.chosen(found, {"rate": value})
    with pytest.raises(KnobError, match=r"^depth: is not a knob of this recipe \(its knobs: rate, width, data\)$"):
        knobs.chosen(found, {"depth": 3})


def test_train_py_refuses_a_knob_no_float_holds_in_words(tmp_path):
    """train.py given a 400-digit knob (as the server passes knobs, or on its command line) stops with the knob's
    name, not a traceback."""
    recipe = MLP
    for env, argv in (({knobs.ENVIRONMENT: '{"steps": 1%s}' % ("0" * 400)}, []),
                      ({}, ["--knob", "steps=" + "9" * 400])):
        ran = subprocess.run([sys.executable, "train.py", "--out", str(tmp_path / "out"), *argv], cwd=recipe,
                             env=os.environ | env, capture_output=True, text=True, timeout=120)
        assert ran.returncode != 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
        assert "steps:" in ran.stderr + ran.stdout


@pytest.mark.parametrize(("table", "said"), [
    ({"rate": {"min": 0, "max": 1, "default": 0.5}}, "training.knobs.rate.description"),
    ({"rate": {"description": "d", "min": 1, "max": 0, "default": 0.5}}, "within min..max"),
    ({"rate": {"description": "d", "min": 0, "max": 1}}, "needs min, max and default"),
    ({"rate": {"description": "d", "min": 0, "max": 1, "default": 0.5, "step": 0}}, "step: a number above 0"),
    ({"data": {"description": "d", "choices": ["a"], "default": "b"}}, "'b' is not one of a"),
    ({"data": {"description": "d", "choices": []}}, "choices: a list of names"),
    ({"not a name": {"description": "d", "choices": ["a"]}}, "a plain name"),
])
def test_a_declaration_that_cannot_be_a_knob_is_refused_saying_where(table, said):
    with pytest.raises(KnobError, match=said):
        knobs.parse(table)


def test_the_command_line_takes_knobs_over_the_environment(monkeypatch):
    monkeypatch.setenv(knobs.ENVIRONMENT, json.dumps({"rate": 0.2, "width": 4}))
    assert knobs.given(["--knob", "rate=0.7", "--check"]) == {"rate": "0.7", "width": 4}
    with pytest.raises(KnobError, match="give it as name=value"):
        knobs.given(["--knob", "rate"])
    monkeypatch.setenv(knobs.ENVIRONMENT, "[1, 2]")
    with pytest.raises(KnobError, match="is not a JSON object"):
        knobs.given([])


def test_the_same_moved_knobs_name_the_same_variant():
    assert knobs.variant_id({"rate": 0.3, "width": 4}) == knobs.variant_id({"width": 4, "rate": 0.3})
    assert knobs.variant_id({"rate": 0.3}) != knobs.variant_id({"rate": 0.31})
    found = knobs.parse(DECLARED)
    assert knobs.moved(found, knobs.chosen(found, {"rate": "0.5", "width": 3})) == {"width": 3}


def test_the_catalog_serves_every_declared_knob_as_train_py_reads_it(app):
    from app.services.extensions import models

    with app.app_context():
        declaring = {slug: model.knobs for slug, model in models.catalog.models.items() if model.knobs}
    assert {"mlp", "lenet", "gcn", "vae", "dqn"} <= set(declaring)
    for slug, found in declaring.items():
        assert found == knobs.declared(PROJECT_ROOT / "recipes" / slug)
        assert all(knob.description and knob.read(knob.default) == knob.default for knob in found.values())
    assert declaring["mlp"]["data"].choices == ("xor", "circles", "spiral")
    epochs = declaring["lenet"]["epochs"]
    assert (epochs.name, epochs.default, epochs.minimum, epochs.maximum, epochs.integer, epochs.step) == (
        "epochs", 50, 1, 50, True, None)


def train(*args: str, kernels: bool = True) -> subprocess.CompletedProcess:
    """train.py run alone in the MLP's folder; with its training kernels already set (`kernels`), as it would set them
    by starting itself again (recipekit.training.run), so that torch is imported once."""
    env = os.environ | (KERNELS if kernels else {})
    return subprocess.run([sys.executable, "train.py", *args], cwd=MLP, env=env, capture_output=True, text=True,
                          timeout=300)


def test_train_py_alone_trains_a_variant_into_its_own_folder_and_checks_it_bit_for_bit(tmp_path):
    """`python train.py --knob ...` on the MLP (a second of training): a knob out of range is exit status 2 naming it,
    before anything trains; moved knobs write the variant with its knobs.json where --out says, never the recorded
    weights; --check on it retrains and finds the same bits."""
    recorded = (MLP / "weights.safetensors").read_bytes()
    refused = train("--knob", "hidden=99", kernels=False)  # as a reader types it
    assert refused.returncode == 2 and "hidden: 99 is out of range 1..16" in refused.stderr
    out = tmp_path / "variant"
    made = train("--knob", "data=circles", "--knob", "hidden=4", "--knob", "steps=300", "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert "on its 64 cases after 300 steps" in made.stdout and str(out) in made.stdout
    assert json.loads((out / knobs.SETTINGS).read_text()) == {
        "learning_rate": 0.5, "hidden": 4, "data": "circles", "noise": 0.0, "steps": 300}
    assert (MLP / "weights.safetensors").read_bytes() == recorded
    checked = train("--knob", "data=circles", "--knob", "hidden=4", "--knob", "steps=300", "--out", str(out),
                    "--check")
    assert checked.returncode == 0 and "The same bits" in checked.stdout, checked.stdout
    other = train("--knob", "data=circles", "--knob", "hidden=4", "--knob", "steps=400", "--out", str(out),
                  "--check")
    assert other.returncode == 1  # another knob, other weights: not the stored variant
