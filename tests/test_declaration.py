"""recipe.toml's one schema: what `record` refuses (a key missing, mistyped or unknown, each with its path and what
it expects), the docs' table written from it, a recipe's requirements and imports checked, and the recipe kit's
files in the key of every recipe that imports it."""

import re
import shutil
import time
import tomllib
from pathlib import Path

import pytest

from app.build.cli import documented_keys
from app.domain import catalog as catalog_module
from app.domain.catalog import load_catalog
from app.domain.declaration import Declaration, checked, key_table
from app.domain.labs.fields import DeclarationError
from app.services.config import PROJECT_ROOT, TestConfig

MLP = PROJECT_ROOT / "recipes" / "mlp"


def test_the_docs_table_of_keys_is_the_one_the_schema_writes():
    documented = documented_keys((PROJECT_ROOT / "docs" / "recipes.md").read_text())
    assert documented == key_table(), "run: flask --app wsgi recipe-keys --write docs/recipes.md"


def test_the_readme_names_only_keys_the_schema_has_and_every_required_one():
    readme = (PROJECT_ROOT / "README.md").read_text()
    step = readme[readme.index("2. `recipes/<slug>/recipe.toml`"):readme.index("3. `flask --app wsgi record")]
    named = set(re.findall(r"`\[*(\w+)\]*`", step)) - {"recipes", "docs", "record"}
    assert named <= set(Declaration.model_fields), named - set(Declaration.model_fields)
    required = {name for name, field in Declaration.model_fields.items() if field.is_required()}
    assert required <= named, required - named


def every_recipe_declaration() -> list[Path]:
    return sorted(PROJECT_ROOT.glob("recipes/*/recipe.toml")) + [PROJECT_ROOT / "bench" / "recipes" / "deep-gpt" /
                                                                 "recipe.toml"]


@pytest.mark.parametrize("path", every_recipe_declaration(), ids=lambda p: p.parent.name)
def test_every_declaration_of_the_project_fits_the_schema(path):
    checked(tomllib.loads(path.read_text()))


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["milestone"].pop("year"), "milestone.year: is required (Its year, which orders the catalog's "
                                           "timeline)"),
    (lambda d: d["milestone"].update(year="1986"), "milestone.year: must be an integer, not str '1986'"),
    (lambda d: d.update(grahp={"focus": "hidden"}), "grahp: is not a key the schema knows (did you mean 'graph'?)"),
    (lambda d: d["experiment"]["cases"][0].update(lable="x"), "experiment.cases[0].lable: is not a key the schema "
                                                              "knows (did you mean 'label'?)"),
    (lambda d: d["display"]["groups"][0].update(scale="big"), "display.groups[0].scale: must be 'shared' or 'own'"),
    (lambda d: d["display"].update(curves={"loss_per_epoch": {"x": "Step"}}), "display.curves.loss_per_epoch.y: is "
                                                                              "required"),
    (lambda d: d["steps"].append(dict(d["steps"][0])), "steps: the id 'hidden' is declared twice"),
    (lambda d: d["steps"][0].update(id="overview"), "steps: the id 'overview' is the page's own first step"),
    (lambda d: d["display"].update(scatters={"codes": {"x": "z₁"}}), "display.scatters.codes.y: is required"),
    (lambda d: d["weights"].update(state="learned"), "weights.state: must be 'trained', 'pretrained' or 'random'"),
])
def test_a_key_missing_mistyped_or_unknown_is_refused_with_its_path(change, message):
    declaration = tomllib.loads((MLP / "recipe.toml").read_text())
    change(declaration)
    with pytest.raises(DeclarationError, match=re.escape(message)):
        checked(declaration)


def recipe_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the MLP's recipe and recording under tmp_path: (recipes, manifests)."""
    recipes, manifests = tmp_path / "recipes", tmp_path / "manifests"
    shutil.copytree(MLP, recipes / "mlp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PROJECT_ROOT / "manifests" / "mlp", manifests / "mlp")
    return recipes, manifests


def record(make_app, recipes: Path, manifests: Path, *args: str):
    app = make_app(type("Recording", (TestConfig,), {"RECIPES_DIR": str(recipes), "MANIFESTS_DIR": str(manifests)}))
    return app.test_cli_runner().invoke(args=["record", "mlp", *args])


def test_record_and_its_check_refuse_a_declaration_the_schema_refuses(make_app, tmp_path):
    recipes, manifests = recipe_tree(tmp_path)
    toml = recipes / "mlp" / "recipe.toml"
    toml.write_text(toml.read_text().replace("year = 1986", 'year = "1986"'))
    for args in ((), ("--check",)):
        result = record(make_app, recipes, manifests, *args)
        assert result.exit_code == 1
        assert "recipes/mlp/recipe.toml: milestone.year: must be an integer, not str '1986'" in result.output


def test_a_requirement_not_installed_or_an_import_not_required_makes_the_model_unavailable(make_app, tmp_path):
    recipes, manifests = recipe_tree(tmp_path)
    required = recipes / "mlp" / "requirements.txt"
    required.write_text(required.read_text() + "no-such-package-anywhere>=1\n")
    catalog = load_catalog(manifests, recipes)
    assert catalog.unavailable["mlp"].reason == (
        "recipes/mlp/requirements.txt needs no-such-package-anywhere>=1, which is not installed here "
        "(pip install 'no-such-package-anywhere>=1', or make setup)")
    result = record(make_app, recipes, manifests)
    assert result.exit_code == 1 and "no-such-package-anywhere" in result.output
    required.write_text("torch>=2.1\nsafetensors>=0.4\n")
    (recipes / "mlp" / "model.py").write_text("import sklearn  # noqa\n" + (MLP / "model.py").read_text())
    assert load_catalog(manifests, recipes).unavailable["mlp"].reason == (
        "recipes/mlp/model.py imports sklearn, which requirements.txt does not name (it is scikit-learn)")
    required.write_text("torch>=99\n")
    assert "needs torch>=99, and torch 2." in load_catalog(manifests, recipes).unavailable["mlp"].reason
    (recipes / "mlp" / "model.py").write_text((MLP / "model.py").read_text())
    required.write_text('torch>=2.1\nsafetensors>=0.4\nno-such-package-anywhere>=1 ; extra == "training"\n')
    assert "mlp" in load_catalog(manifests, recipes).models  # only a training needs it: the model is served


def test_the_recipe_kit_is_in_the_key_of_every_recipe_that_imports_it(monkeypatch):
    before = load_catalog(PROJECT_ROOT / "manifests", PROJECT_ROOT / "recipes")
    monkeypatch.setattr(catalog_module, "kit_digest", lambda: "another kit")
    after = load_catalog(PROJECT_ROOT / "manifests", PROJECT_ROOT / "recipes")
    for slug, model in before.models.items():
        uses = model.kit_sha256 is not None
        assert uses == ("recipekit" in "".join(f.content.decode(errors="ignore") for name, f in model.files.items()
                                              if name.endswith(".py"))), slug
        assert (after.models[slug].recipe_sha256 != model.recipe_sha256) == uses, slug
    assert before.models["lenet"].kit_sha256 is not None


def test_a_case_that_cannot_be_replayed_alone_as_among_the_others_is_refused(make_app, tmp_path):
    """What if? replays a case alone: a case that draws from where the one before it left the generator is
    another case alone, and the recorder says which."""
    recipes, manifests = recipe_tree(tmp_path)
    run = recipes / "mlp" / "run.py"
    noise = 'lambda: {"label": "noise", "vectors": [{"key": "n", "label": "n", "values": torch.rand(3).tolist()}]}'
    text = run.read_text()
    assert '"training": training_case,\n' in text
    run.write_text(text.replace(
        '"training": training_case,\n', f'"training": training_case, "noise": {noise}, "more-noise": {noise},\n'))
    toml = recipes / "mlp" / "recipe.toml"
    cases = '[[experiment.cases]]\nid = "noise"\nlabel = "Noise"\n\n[[experiment.cases]]\nid = "more-noise"\n'
    toml.write_text(toml.read_text().replace('[recording]', cases + 'label = "More"\n\n[recording]'))
    result = record(make_app, recipes, manifests, "--out", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "run.py replay(case='more-noise') answers vector 'n' otherwise than the whole replay does" in result.output


def test_a_requirement_installed_while_the_server_runs_serves_its_model_at_the_next_look(tree, tree_app, tmp_path,
                                                                                          monkeypatch):
    """No restart: a package installed into a folder of the import path (a distribution's metadata is what pip
    adds) is seen at the catalog's next look, and the model is served."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    _, folder = tree.copy("mlp")
    listed = folder / "requirements.txt"
    listed.write_text(listed.read_text() + "tensorviz-installed-later>=1\n")
    client = tree_app(CATALOG_RELOAD_SECONDS=0.01).test_client()
    gone = client.get("/api/models/mlp")
    assert gone.status_code == 503 and "tensorviz-installed-later>=1, which is not installed here (pip install " \
        "'tensorviz-installed-later>=1', or make setup)" in gone.get_json()["error"]["message"]
    info = site / "tensorviz_installed_later-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorviz-installed-later\nVersion: 1.0\n")
    time.sleep(0.05)  # past the catalog's interval
    assert client.get("/api/models/mlp").status_code == 200
    assert client.get("/models/mlp").status_code == 200
