"""The docs that list code are held to it (the settings table of docs/operations.md names every setting), and the
README stays a map."""

import re
import tomllib

from app.services.config import PROJECT_ROOT, Config


def documented_settings() -> set[str]:
    """The settings the table of docs/operations.md names in its first column."""
    text = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    table = text[text.index("| setting | default | meaning |"):]
    rows = table[:table.index("\n\n")].splitlines()[2:]
    return {name for row in rows for name in re.findall(r"`([A-Z0-9_]+)`", row.split("|")[1])}


def test_the_settings_table_names_every_setting_and_no_other():
    """Every setting of Config, and every checkpoint setting a recipe declares, has its row; a row names nothing
    else."""
    settings = {name for name in vars(Config) if name.isupper()}
    for declaration in PROJECT_ROOT.glob("recipes/*/recipe.toml"):
        checkpoint = tomllib.loads(declaration.read_text()).get("checkpoint", {})
        settings |= {checkpoint["setting"]} if "setting" in checkpoint else set()
    documented = documented_settings()
    assert settings <= documented, settings - documented
    assert documented <= settings, documented - settings


def test_the_readme_is_a_map_that_opens_with_the_two_commands():
    """At most 200 lines, figures left to bench/README.md; its first block is the two commands, set-up and tests."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    first = readme[readme.index("```sh") + 5:readme.index("```", readme.index("```sh") + 5)]
    assert [line.split()[:2] for line in first.strip().splitlines()] == [["make", "serve"], ["make", "test"]]


def test_the_cache_layers_table_is_the_code_s_and_no_layer_is_made_elsewhere():
    """docs/operations.md's table of layers says what app/domain/caches.py's LAYERS say, row for row; no module of
    the app makes a bounded store of its own (caches.kept is the one place)."""
    from app.domain.caches import LAYERS

    text = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    table = text[text.index("| layer | what it keeps |"):]
    rows = [row.strip() for row in table[:table.index("\n\n")].splitlines()[2:]]
    assert rows == [f"| `{layer.name}` | {layer.keeps} | {layer.key} | {layer.bound} | {layer.let_go} | "
                    + ", ".join(f"`{where}`" for where in layer.where.split(", ")) + " |" for layer in LAYERS.values()]
    makers = [p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "app").rglob("*.py")
              if "SizedLRU(" in p.read_text()]
    assert makers == ["app/domain/caches.py"]


def test_the_readmes_first_screen_says_where_to_open_and_lists_every_model():
    """The address to open and the port setting under the two commands, then the catalog, every model once."""
    from .conftest import CATALOG_SLUGS

    readme = (PROJECT_ROOT / "README.md").read_text()
    first_screen = readme[:readme.index("**Which PyTorch.**")]
    assert "http://127.0.0.1:8000/" in first_screen and "PORT=" in first_screen
    table = first_screen[first_screen.index("| the catalog, by year |"):]
    listed = re.findall(r"\(`([a-z0-9-]+)`[;)]", table)  # (`slug`) or (`slug`; a figure)
    assert sorted(listed) == sorted(CATALOG_SLUGS), set(listed) ^ set(CATALOG_SLUGS)
