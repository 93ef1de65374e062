"""A catalog card's picture is the model's own output: one recorded matrix drawn as the page draws it (ink on paper,
or the charts' diverging scale), served beside the manifest; a declared one the recording lacks is refused."""

import re

from app.domain.catalog import load_catalog
from app.domain.pictures import NEGATIVE, POSITIVE, ZERO, colour
from app.services.config import PROJECT_ROOT

from .conftest import CATALOG_SLUGS


def test_the_pictures_colours_are_the_pages():
    css = (PROJECT_ROOT / "static" / "css" / "site.css").read_text()
    read = {name: re.search(rf"--{name}:\s*(#[0-9a-f]{{6}})", css).group(1) for name in ("chart-zero", "mint", "rust")}
    assert (ZERO, POSITIVE, NEGATIVE) == (read["chart-zero"], read["mint"], read["rust"])


def fills(svg: bytes) -> list[str]:
    return re.findall(rb'<rect [^>]*fill="(#[0-9a-f]{6})"', svg)


def test_the_diffusion_models_card_shows_the_digit_it_drew_in_ink(client):
    """The declared picture, x_0 of the recorded sample: its darkest cell where the digit's value is largest."""
    manifest = client.get("/api/models/ddpm").get_json()
    digit = next(m for m in manifest["experiment"]["cases"][0]["matrices"] if m["key"] == "step_c0")["values"]
    svg = client.get(f"/models/ddpm/{manifest['revision']}/picture.svg").data
    cells = fills(svg)
    flat = [v for row in digit for v in row]
    assert cells == [colour(v, 0, 16).encode() for v in flat]  # row by row, ink on paper at 16 grey levels
    assert cells[flat.index(max(flat))] == b"#000000" and cells[flat.index(min(flat))] == b"#ffffff"
    assert b"<title>x_0, the end of the chain</title>" in svg


def test_an_attention_map_is_drawn_on_the_diverging_scale_and_every_model_with_cases_has_a_picture(client):
    svg = client.get(f"/models/gpt/{client.get('/api/models/gpt').get_json()['revision']}/picture.svg").data
    assert b"Block 0 \xc2\xb7 head 0 attention" in svg and len(fills(svg)) == 64
    for slug in CATALOG_SLUGS:
        cases = client.get(f"/api/models/{slug}").get_json()["experiment"]["cases"]
        listed = {f["name"] for f in client.get(f"/api/models/{slug}/files").get_json()["files"]}
        assert ("picture.svg" in listed) == bool(cases), slug


def test_the_catalog_cards_show_the_pictures_and_tell_apart_two_cards_of_one_milestone(client):
    page = client.get("/").get_data(as_text=True)
    assert page.count('class="card-preview card-picture"') >= 15
    assert "GPT-2 · 2019 · trained here" in page and "GPT-2 · 2019 · a real checkpoint" in page
    assert "BERT pretraining · 2018 · random weights" in page and "BERT pretraining · 2018 · trained here" in page
    assert "draw a digit" in page and "switch a head off" in page and "train your own" in page


def test_a_declared_picture_the_recording_lacks_makes_the_model_unavailable(tree):
    _, folder = tree.copy("ddpm")
    toml = folder / "recipe.toml"
    toml.write_text(toml.read_text().replace('picture = { case = "sample", item = "step_c0" }',
                                             'picture = { case = "sample", item = "nowhere" }'))
    catalog = load_catalog(tree.manifests, tree.recipes)
    assert "display.picture: the recording has no matrix 'nowhere'" in catalog.unavailable["ddpm"].reason
