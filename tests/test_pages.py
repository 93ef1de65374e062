"""Server-rendered pages: every section and template branch, readable without JavaScript."""

import csv
import html
import io
import json
import re

import pytest
from markupsafe import escape

from app.domain.numbers import significant
from app.domain.recipes import read_metadata
from app.services.config import PROJECT_ROOT
from app.services.extensions import models

from .conftest import CATALOG_SLUGS, bert_manifest, eventually


def text(response) -> str:
    return response.get_data(as_text=True)


@pytest.mark.parametrize("value, shown", [
    (5.625725974555662e-05, "5.626e-5"), (0.24600964304811473, "0.246"), (2.801952562219697, "2.802"),
    (0.7524517450851487, "0.7525"), (0.17444152428483226, "0.1744"), (1, "1"), (-0.0123456, "-0.01235"),
    (1.227e-14, "1.227e-14"), (1.2e-14, "1.2e-14"), (-3.0e-7, "-3e-7"), (0.00012346, "0.0001235"),
    (9.99996e-5, "0.0001"), (1e-4, "0.0001"),
])
def test_four_significant_digits_positional_down_to_one_ten_thousandth(value, shown):
    assert significant(value) == shown


def test_catalog_has_a_card_per_model_grouped_by_category(client):
    page = text(client.get("/"))
    assert re.search(r'<h2 id="cat-\d+">Language milestones</h2>', page)
    assert "Learn from both sides of a masked token" in page
    assert "What changes when the encoder can see both left and right context?" in page
    assert "BERT pretraining · 2018" in page
    assert 'href="/models/bert"' in page
    assert 'src="/models/bert/0c48027dcf5a807d/picture.svg"' in page  # its recorded attention, the model's own output
    for tag in bert_manifest()["tags"]:
        assert f">{tag}</a>" in page


def test_catalog_is_a_timeline_whose_cards_say_whether_the_weights_learned_anything(client):
    """Within a category the milestones run by year; each card says trained (on what), random or pretrained,
    as each recipe declares it."""
    page = text(client.get("/"))
    from app.services.extensions import models

    with client.application.app_context():
        listed = models.catalog.models.values()
    for category in {m.manifest["category"] for m in listed}:
        section = page.split(f">{category}</h2>")[1].split("</section>")[0]
        years = [int(y) for y in re.findall(r'class="card-eyebrow">[^<]*? · (\d{4})(?: · [a-z ]+)?</span>', section)]
        assert years == sorted(years) and len(years) == sum(m.manifest["category"] == category for m in listed)
    cards = {slug: page.split(f'class="card-link" href="/models/{slug}"')[1].split("</li>")[0]
             for slug in ("lenet", "bert", "bert-base")}
    assert 'data-weights="trained"' in cards["lenet"] and "scikit-learn&#39;s 8x8 handwritten digits" in cards["lenet"]
    assert 'data-weights="random"' in cards["bert"] and "Random weights" in cards["bert"]
    assert 'data-weights="pretrained"' in cards["bert-base"] and "trained" not in cards["bert-base"].lower().replace(
        "pretrained", "")


def test_catalog_opens_with_a_path_through_the_milestones_and_the_tags_folded(client):
    page = text(client.get("/"))
    path = re.search(r'<ol class="path-steps">(.*?)</ol>', page, re.S).group(1)
    slugs = re.findall(r'href="/models/([a-z0-9-]+)"', path)
    assert sorted(slugs) == sorted(CATALOG_SLUGS)  # every model once
    years = [int(y) for y in re.findall(r'class="path-year">(\d+)<', path)]
    assert years == sorted(years)  # in the order the milestones came
    # Two models of one milestone are told apart by their weights: GPT's tiny sorter and the GPT-2 DataLab.
    gpts = re.findall(r'class="path-name">GPT-2</span><span class="path-weights"> · ([a-z ]+)</span>', path)
    assert sorted(gpts) == ["a real checkpoint", "trained here"]
    order = [page.index(part) for part in ('class="milestone-path"', '<details class="tag-filter">', 'class="cards"')]
    assert order == sorted(order)
    assert re.search(r'<summary>Filter by tag \(\d+ tags\)</summary>', page)
    chosen = text(client.get("/?tag=NSP"))
    assert '<details class="tag-filter" open>' in chosen and "<summary>Filter by tag: NSP</summary>" in chosen


def test_catalog_filters_by_tag(client):
    assert "Learn from both sides" in text(client.get("/?tag=NSP"))
    page = text(client.get("/?tag=Vision"))
    assert "Learn from both sides" not in page
    assert "No model is tagged “Vision”" in page


def test_catalog_shows_unavailable_models_with_why(make_app, tree):
    tree.add("bert")
    tree.add("broken", manifest=b"{")
    page = text(make_app(tree.config(TESTING=True)).test_client().get("/"))
    assert "Unavailable" in page and "broken" in page and "is not valid JSON" in page


def test_model_page_header_and_snapshot(client):
    page = text(client.get("/models/bert"))
    assert "Language milestones" in page and "<h1>Learn from both sides of a masked token</h1>" in page
    assert "Curated by TensorViz · BERT pretraining · 5-step tour" in page  # the overview and the recipe's 4
    assert "Architecture snapshot · No Python required" in page
    assert 'href="/models/bert/0c48027dcf5a807d/graph.tensorviz.json" download>Download graph ↓' in page
    assert 'data-graph-url="/models/bert/graph.json"' in page
    assert 'data-graph-open="[]"' in page  # the overview: the model at block level, every module closed
    # A step's link opens the modules nested in one chain: all, the deepest first (graphlayout.open_path).
    stepped = text(client.get("/models/bert?step=masked"))
    assert 'data-graph-open="[&#34;encoder.attention&#34;, &#34;encoder&#34;]"' in stepped


def test_every_page_opens_with_what_it_holds_and_a_section_navigation(client):
    """No boilerplate between the title and the input: the navigation names only the sections the page has, each a
    link to its anchor."""
    for slug, expected in (("lenet", ["lab", "architecture", "example", "whatif", "verification", "retraining",
                                      "about"]),
                           ("bert", ["lab", "architecture", "example", "whatif", "verification", "about"]),
                           ("mlp", ["lab", "train-your-own", "architecture", "example", "whatif", "verification",
                                    "retraining", "about"])):
        page = text(client.get(f"/models/{slug}"))
        nav = re.search(r'<nav class="section-nav".*?</nav>', page, re.S).group(0)
        anchors = re.findall(r'href="#([a-z-]+)"', nav)
        assert anchors == expected
        assert all(f'id="{a}"' in page for a in anchors)
        assert "What you will see:" not in page  # the same two lines on every page said nothing of this one
        header = re.search(r'<header class="model-header">.*?</header>', page, re.S).group(0)
        assert 'class="path-nav"' not in header  # where to go next is at the page's end


def test_the_tour_opens_on_an_overview_of_the_top_level_parts(client):
    page = text(client.get("/models/lenet"))
    assert re.search(r'class="tour-step is-current" id="step-overview"', page)
    assert "The whole LeNet at a glance" in page
    assert "the numbers pass through stage1, stage2, fc1, act, fc2." in page  # flatten@LeNet#0 has no name
    assert "The 2 boxes marked ▸ are modules drawn closed" in page
    assert 'data-step-link="convolve"' in page  # the recipe's openingStep, the heart of the tour


def test_tour_opens_on_the_overview_and_follows_the_url(client):
    page = text(client.get("/models/bert"))
    assert re.search(r'class="tour-step is-current" id="step-overview"', page)
    assert page.count('data-step-id="') == 5
    # the softmax the heart of the tour targets, by its plain name (its source line is in the node's details)
    assert "On the graph: softmax · <code>encoder.attention.softmax</code>" in page
    assert ">step 3, " in page and 'data-step-link="bidirectional"' in page
    page = text(client.get("/models/bert?step=masked"))
    assert re.search(r'class="tour-step is-current" id="step-masked"', page)


def test_case_picker_and_recorded_values(client):
    page = text(client.get("/models/bert"))
    assert 'aria-label="Pretraining example"' in page
    for case in bert_manifest()["experiment"]["cases"]:
        assert f'data-case-id="{case["id"]}"' in page and case["label"] in page
    assert "<td>0.1762</td>" in page  # mask-a, head 0, cell [0][0]
    page = text(client.get("/models/bert?case=mask-b"))
    assert "<td>0.1744</td>" in page
    assert "Min 0.1037 · Max 0.2288" in page
    assert all(f'<dd title="{v}">{v}</dd>' in page for v in ("4.5", "0.7446", "5.245"))
    case = page.split('id="case-panel"')[1].split('class="exports"')[0]
    # (one more of each, empty, in the page's <template>s that the labs fill for live runs)
    assert case.count('class="chip chip-token"') == 18
    assert case.count('class="bar-row"') == 18


def test_token_ids_are_shown_as_the_tokens_they_are(client):
    """The vectors a lab kind says hold token ids are chips of the tokens' names, each id on hover; others stay
    numbers."""
    case = text(client.get("/models/bert-mlm")).split('id="case-panel"')[1].split('class="exports"')[0]
    sentence = ["[CLS]", "[MASK]", "old", "dogs", "bark", "[SEP]", "they", "bark", "loudly", "[SEP]"]
    corrupted = case.split("Corrupted token IDs")[1].split("</ol>")[0]
    assert re.findall(r'class="chip chip-token" title="token \d+ at position \d+">([^<]+)<', corrupted) == sentence
    assert 'title="token 2 at position 1">[MASK]<' in corrupted
    selected = case.split("MLM loss positions")[1].split("</ol>")[0]  # flags, not tokens
    assert re.findall(r'title="position \d+">(\d)<', selected) == ["0", "1"] + ["0"] * 8
    seed = text(client.get("/models/bert")).split('id="case-panel"')[1]  # no names: specials by name, ids else
    assert 'title="token 1 at position 0">CLS<' in seed and 'title="token 4 at position 1">4<' in seed


def test_a_vector_that_counts_from_1_is_numbered_from_1(client):
    """Epochs and lengths count from 1: a recorded vector that says so (`first`) is drawn with those numbers."""
    page = text(client.get("/models/transformer?case=test-split"))
    curve = page.split('data-label="Mean training loss in each epoch')[1].split("</figure>")[0]
    assert 'data-first="1"' in curve and 'data-chart="curve"' in page  # a line chart, its x axis from 1
    assert re.findall(r'<tr><th scope="row">(\d+)</th>', curve)[:3] == ["1", "2", "3"]


def test_feature_maps_are_small_multiples_by_declared_stage_with_every_value_in_a_table(client):
    """LeNet's 40 feature maps: one figure per stage the recipe declares, each map a small picture and all its
    values in tables inside one disclosure (open without scripts, which close it once the maps are drawn)."""
    page = client.get("/models/lenet?case=three").get_data(as_text=True)
    stage = r'<figure class="chart multiples-figure".*?</figure>\s*</div>\s*<details.*?</details>'
    figures = re.findall(stage, page, re.S)
    assert len(figures) == 4
    assert [len(re.findall(r'class="feature-map"', f)) for f in figures] == [6, 6, 16, 16]
    assert all(f.count('<table class="value-table">') == f.count('class="feature-map"') for f in figures)
    assert "Stage 2 pooled" in figures[3] and "16 channels of 2 × 2 on one scale" in figures[3]
    assert page.count('class="chart heatmap-figure"') == 1  # the saliency stands alone
    assert page.count('class="chart image-figure"') == 1 and 'data-ink="16' in page  # the drawing: ink on paper
    assert page.count('<details class="value-details" open>') == 6
    vit = client.get("/models/vit").get_data(as_text=True)
    assert vit.count("data-over=") == 2 and "4 heads of 4 × 4 on one scale, drawn over the input image" in vit


def test_a_groups_maps_keep_their_own_labels_and_the_names_of_their_rows_and_columns(tree, tree_app):
    """A map drawn among small multiples says which it is where the pointer rests (its own label: which layer or
    head), and its table and cells name its rows and columns as the recipe named them."""
    manifest_path, _ = tree.copy("lenet")
    manifest = json.loads(manifest_path.read_text())
    case = next(c for c in manifest["experiment"]["cases"] if c["id"] == "three")
    for matrix in case["matrices"]:
        if matrix["key"].startswith("stage1_pool_c"):
            matrix["rows"] = [f"top {i}" for i in range(4)]
            matrix["columns"] = [f"left {j}" for j in range(4)]
    manifest_path.write_text(json.dumps(manifest))
    page = tree_app().test_client().get("/models/lenet?case=three").get_data(as_text=True)
    pooled = re.search(r'<figure class="chart multiples-figure" data-chart="multiples" data-label="Stage 1 pooled".*?'
                       r'</details>', page, re.S).group(0)
    assert 'title="Stage 1 pooled · channel 2 (4×4)"' in pooled
    assert pooled.count("data-axes=") == 6 and "top 3" in pooled and "left 0" in pooled
    tables = re.findall(r'<table class="value-table">.*?</table>', pooled, re.S)
    assert len(tables) == 6 and all("left 3" in t and "top 0" in t for t in tables)


def test_unknown_case_or_step_falls_back_with_a_notice(client):
    page = text(client.get("/models/bert?case=nope&step=gone"))
    assert "There is no recorded case “nope”" in page and "There is no tour step “gone”" in page
    assert "<td>0.1762</td>" in page


def test_verification_section_and_about(client):
    page = text(client.get("/models/bert"))
    for check in bert_manifest()["provenance"]["numericalChecks"]:
        assert check in page
    assert 'id="reverify"' in page and 'data-verify-url="/api/models/bert/verifications"' in page
    assert "Architecture · 2018" in page
    assert "One post-LN encoder, width eight" in page
    assert 'href="https://arxiv.org/abs/1810.04805"' in page
    assert "Untrained fixed-length model without padding" in page
    assert "0c48027dcf5a807d" in page
    assert "fa041d05ccb2a15cb1e139d53180ab5ca4930dd11ba12f3fd3aec170228f0fc5" in page
    assert "2026-09-17 · Python 3.13.13 / Torch 2.7.1" in page
    assert "differs from the recording" in page
    assert 'href="/api/models/bert">Read the model manifest' in page
    for name in ("model.py", "run.py", "requirements.txt", "graph.tensorviz.json", "preview.svg"):
        assert f'href="/models/bert/0c48027dcf5a807d/{name}" download>{name}</a>' in page


def test_case_fragment_and_exports(client):
    fragment = text(client.get("/models/bert/cases/both"))
    assert 'data-case="both"' in fragment and "<td>0.175</td>" in fragment
    assert "<html" not in fragment
    response = client.get("/models/bert/cases/mask-b.csv")
    assert response.content_type == "text/csv; charset=utf-8"
    assert 'filename="bert-mask-b.csv"' in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(text(response))))
    assert len(rows) == 36 + 6 + 6 + 6 + 16 + 2 + 3
    assert rows[0] == {"case": "mask-b", "kind": "matrix", "label": "Bidirectional attention · head 0",
                       "row": "0", "column": "0", "value": "0.17444152428483226", "key": "attention_head_0",
                       "row_name": "CLS", "column_name": "CLS"}  # the tokens the lab names the axes by
    recorded = next(c for c in bert_manifest()["experiment"]["cases"] if c["id"] == "mask-b")
    assert client.get("/models/bert/cases/mask-b.json").get_json()["case"] == recorded


@pytest.mark.parametrize("path", ["/models/nope", "/models/bert/cases/nope", "/models/bert/cases/nope.csv"])
def test_friendly_404_pages(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.content_type.startswith("text/html")
    assert "Back to all models" in text(response)


def test_no_resource_leaves_the_site(client):
    for path in ("/", "/models/bert", "/models/nope"):
        page = text(client.get(path))
        resources = re.findall(r'(?:src|href)="([^"]+)"', page)
        stylesheets_and_scripts = re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="([^"]+)"', page)
        assert stylesheets_and_scripts and all(r.startswith("/") for r in stylesheets_and_scripts)
        for resource in resources:
            if resource.startswith("/") and not resource.startswith("/api/"):
                assert client.get(resource.split("#")[0]).status_code == 200, resource


def test_page_without_a_stored_snapshot_still_renders(make_app, tree):
    tree.add("bert")
    client = make_app(tree.config(TESTING=True)).test_client()
    page = text(client.get("/models/bert"))
    assert "Architecture snapshot" not in page and 'data-graph-url="/models/bert/' in page
    assert "All 36 layers and ops" in page


def test_prerender_fills_the_page_memo_that_requests_then_use(app):
    from app.web.pages import prerender

    prerender(app)
    with app.app_context():
        kept = models.catalog.derived("pages", dict)  # the kept prerender made, hung off the current catalog
    assert {key[0] for key in kept["pages"]} == set(CATALOG_SLUGS)
    before = dict(kept["pages"])
    app.test_client().get("/models/gpt")
    # slug, the case and the step shown, the checkpoint's state (none), then the neighbours the page links
    key = next(key for key in before if key[:4] == ("gpt", "pi", "overview", "None"))
    assert kept["pages"][key] is before[key]  # served, not rendered again


def test_no_query_string_makes_the_server_render_again(app):
    """An unknown case or step is the page shown instead, rendered once, with its notice set in."""
    client = app.test_client()
    client.get("/models/gpt")
    with app.app_context():
        kept = models.catalog.derived("pages", dict)
    rendered = len(kept["pages"])
    pages = [client.get(f"/models/gpt?case=nope-{i}&step=gone-{i}") for i in range(20)]
    assert len(kept["pages"]) == rendered
    assert all("There is no recorded case “nope-" in p.get_data(as_text=True) for p in pages)
    assert len({p.headers["ETag"] for p in pages}) == 20  # each answer's own content
    escaped = client.get("/models/gpt?case=<script>x</script>").get_data(as_text=True)
    assert "<script>x</script>" not in escaped and "&lt;script&gt;x&lt;/script&gt;" in escaped


def test_a_recording_larger_than_the_page_draws_is_summarised_and_exported_whole(make_app, tree):
    """A 1000 x 1000 matrix is drawn as 63 x 63 block means: the page stays small, the exports keep every value."""
    manifest = bert_manifest()
    big = [[(i * 1000 + j) / 1e6 for j in range(1000)] for i in range(1000)]
    manifest["experiment"]["cases"][0]["matrices"][0]["values"] = big
    tree.add("bert", manifest)
    client = make_app(tree.config(TESTING=True)).test_client()
    page = client.get("/models/bert")
    assert page.status_code == 200 and len(page.data) < 2_000_000
    html = re.sub(r"\s+", " ", page.get_data(as_text=True))
    assert "1000 × 1000 values, more than this page draws: shown as the means of 16 × 16 blocks" in html
    assert ">0–15<" in html and ">992–999<" in html and "Min 0 · Max 1<" in html
    exported = client.get(f"/models/bert/cases/{manifest['experiment']['cases'][0]['id']}.csv").get_data(as_text=True)
    assert exported.count("\n") > 1_000_000


def test_an_error_page_ends_its_message_with_one_period(make_app):
    from app.services.config import TestConfig

    app = make_app(TestConfig)

    @app.get("/boom")
    def boom():
        raise RuntimeError("a bug")

    page = app.test_client().get("/boom").get_data(as_text=True)
    assert "it has been logged.</p>" in page and "logged.." not in page
    missing = app.test_client().get("/models/nope").get_data(as_text=True)
    assert "No model &#39;nope&#39;.</p>" in missing or "No model 'nope'.</p>" in missing


def test_catalog_thumbnails_show_each_models_shape_without_its_text(client):
    """A card shows the model's own output where its recording holds one (tests/test_pictures.py), else its shape;
    every model's shape is served without its text."""
    html = client.get("/").get_data(as_text=True)
    cards = re.findall(r'<img class="card-preview( card-picture)?" src="([^"]+)"', html)
    assert len(cards) == len(CATALOG_SLUGS)
    assert all(source.endswith("/picture.svg" if picture else "/thumbnail.svg") for picture, source in cards)
    revisions = {slug: client.get(f"/api/models/{slug}").get_json()["revision"] for slug in CATALOG_SLUGS}
    for source in (f"/models/{slug}/{revision}/thumbnail.svg" for slug, revision in revisions.items()):
        svg = client.get(source).get_data(as_text=True)
        preview = client.get(source.replace("thumbnail.svg", "preview.svg")).get_data(as_text=True)
        assert "<text" not in svg and "<text" in preview
        assert svg.count("<path") == preview.count("<path") > 0  # every box and arrow of the snapshot


def test_the_graph_as_drawn_gives_each_node_its_text(client):
    answer = client.get("/models/gpt/graph.json")
    assert answer.status_code == 200 and answer.content_type == "application/json"
    drawn = answer.get_json()
    layers = {layer["id"]: layer for layer in drawn["layers"]}
    # a closed module: its class, and its plain name as the recipe declares it ("h.*" = "transformer block")
    assert layers["h.0"]["shown"] == {"label": "h.0", "op": "Block", "plain": "transformer block"}
    assert layers["lm_head"]["shown"] == {"label": "lm_head", "op": "Linear 32→11 · shared",  # tied to wte
                                          "plain": "next-token scores"}
    assert layers["input:idx"]["shown"] == {"label": "idx", "op": "Input 1,8", "plain": "input"}
    assert layers["h.0.attn.softmax"]["shown"]["plain"] == "softmax"  # by the rule for torch's modules
    page = text(client.get("/models/gpt"))  # the tour's steps name their nodes so too
    assert "On the graph: token embedding · <code>wte</code>" in page
    assert "On the graph: final layer norm · <code>ln_f</code>" in page
    index = next(layer for layer in drawn["layers"] if layer["id"].startswith("index@h.0.attn"))
    assert index["shown"]["op"] == "indexing [:, :, :8, :8]"
    assert layers["add@GPT#0"]["shown"]["in_words"] == "the 1st Tensor.add in the model's own forward"
    assert len(drawn["connections"]) == len(client.get("/api/models/gpt").get_json()["connections"])
    seed = {layer["id"]: layer for layer in client.get("/models/bert/graph.json").get_json()["layers"]}
    assert seed["python@encoder.attention#0"]["shown"]["label"] == "unflatten"  # named by [graph.ops]
    assert client.get("/models/nope/graph.json").status_code == 404


def test_every_layer_downloads_as_csv(client):
    answer = client.get("/models/gpt/layers.csv")
    assert answer.status_code == 200 and answer.content_type.startswith("text/csv")
    assert 'filename="gpt-layers.csv"' in answer.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(answer.get_data(as_text=True))))
    assert len(rows) == len(client.get("/api/models/gpt").get_json()["layers"])
    wte = next(r for r in rows if r["id"] == "wte")
    source = (PROJECT_ROOT / "recipes" / "gpt" / "model.py").read_text().splitlines()
    declared = next(i for i, line in enumerate(source, 1) if "self.wte = nn.Embedding" in line)
    called = next(i for i, line in enumerate(source, 1) if "self.wte(" in line)
    assert (wte["op"], wte["line"], wte["call_line"]) == ("Embedding", str(declared), str(called))
    assert json.loads(wte["params"]) == {"num_embeddings": 11, "embedding_dim": 32}


def test_a_large_graph_lists_its_first_layers_and_links_every_one(make_app, tree):
    manifest = bert_manifest()
    extra = [{"id": f"op@x#{i}", "label": f"op@x#{i}", "op": "torch.add", "kind": "layer", "parent": None,
              "params": {}} for i in range(500)]
    tree.add("bert", manifest | {"layers": manifest["layers"] + extra})
    page = text(make_app(tree.config(TESTING=True)).test_client().get("/models/bert"))
    assert "The first 400 of 536 layers and ops" in page and 'href="/models/bert/layers.csv"' in page
    assert page.count("<th scope=\"row\"><code>") == 400


def test_a_matrix_that_names_only_its_columns_or_only_its_rows_is_drawn_with_those_names(make_app, tmp_path):
    """A recipe may name one axis of a matrix and leave the other numbered (an episode's cells: row, column)."""
    from app.services.config import TestConfig

    from .conftest import ModelTree

    manifest = bert_manifest()
    case = manifest["experiment"]["cases"][0]
    first = case["matrices"][0]
    rows = len(first["values"])
    case["matrices"] = [first | {"key": "by_columns", "columns": [f"col-{j}" for j in range(len(first["values"][0]))]},
                        first | {"key": "by_rows", "rows": [f"row-{i}" for i in range(rows)]}]
    tree = ModelTree(tmp_path)
    tree.add("bert", manifest)
    client = make_app(type("Named", (TestConfig,), tree.config())).test_client()
    page = client.get(f"/models/bert?case={case['id']}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "col-0" in html and f"row-{rows - 1}" in html


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_a_lab_is_titled_by_what_it_does_and_not_as_the_what_if_panel(client, slug):
    """The What if? panel changes a module; a lab runs the reader's own input: one title cannot name both."""
    title = re.search(r'<h2 id="lab-title">(.*?)</h2>', text(client.get(f"/models/{slug}")), re.S)
    assert title is None or "What if" not in title[1], title[1]


def test_the_page_carries_the_glossary_it_explains_terms_with(client):
    from app.domain.glossary import GLOSSARY

    page = client.get("/models/vae").get_data(as_text=True)
    found = re.search(r'data-glossary="([^"]*)"', page)
    own = read_metadata(PROJECT_ROOT / "recipes" / "vae")["glossary"]
    assert json.loads(html.unescape(found.group(1))) == GLOSSARY | own  # the recipe's symbols beside the catalog's
    assert {"μ", "σ", "ε"} <= set(own) and "ε" not in GLOSSARY  # ε means one thing here and another in the DQN
    assert all(definition.endswith(".") and len(definition) < 300 for definition in GLOSSARY.values())
    assert {"ELBO", "KL", "nats", "rtol", "atol", "logit lens", "residual stream", "attribution"} <= set(GLOSSARY)


# A symbol a learner may not know: a Greek letter, or a letter under an accent (x̂, D̃, B̄), with the marks on it.
SYMBOL = re.compile(r"[\u0370-\u03ff\u1f00-\u1fff][\u0300-\u036f]*|[A-Za-z][\u0300-\u036f]+")


def glossed_spans(words: str, glossary: dict[str, str]) -> list[tuple[int, int]]:
    """Where the page's glossary finds its terms in `words`, by static/js/glossary.js's rule: a whole term (a plural s
    allowed) with no letter, digit or underscore on either side, in any case unless it has capitals."""
    spans = []
    for term in glossary:
        flags = re.I if term == term.lower() else 0
        spans += [m.span() for m in re.finditer(rf"(?<!\w){re.escape(term)}s?(?!\w)", words, flags)]
    return spans


def test_the_glossary_covers_every_symbol_a_page_uses(app, client):
    """Every Greek letter and accented letter in a page's words (its tour, recorded cases, notes and labels) is inside
    a term of the page's glossary (the catalog's and the recipe's [glossary]), so a learner can hover it; a symbol's
    meaning is its recipe's to say (ε is exploration in the DQN and noise in the DDPM)."""
    with app.app_context():
        pages = {slug: [case["id"] for case in model.manifest["experiment"]["cases"]]
                 for slug, model in models.catalog.models.items()}
    unexplained = set()
    for slug, cases in pages.items():
        for case_id in cases:
            page = text(client.get(f"/models/{slug}?case={case_id}"))
            glossary = json.loads(html.unescape(re.search(r'data-glossary="([^"]*)"', page).group(1)))
            body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
            words = html.unescape(re.sub(r"<[^>]+>", " ", body))
            spans = glossed_spans(words, glossary)
            for found in SYMBOL.finditer(words):
                if not any(a <= found.start() < b for a, b in spans):
                    around = " ".join(words[max(0, found.start() - 30):found.end() + 20].split())
                    unexplained.add((slug, found.group(), around))
    assert not unexplained, "\n".join(f"{slug}: {symbol!r} in …{around}…" for slug, symbol, around in
                                       sorted(unexplained)[:40])


def test_attention_tables_name_their_queries_and_keys_and_long_vectors_scroll(client):
    assert "<th scope=\"col\">query / key</th>" in text(client.get("/models/bert?case=mask-b"))
    page = text(client.get("/models/bert-base"))
    assert page.count('class="bars-scroll" tabindex="0" role="region"') >= 1


def test_attention_of_several_layers_and_heads_is_gathered_into_one_overview_per_kind():
    from app.domain.attention import overviews

    keys = ("attention_b0_h0", "attention_b0_h1", "attention_b1_h1", "cross_attention_l0_h0", "image", "attention_last")
    maps = [{"key": key, "values": [[1.0]]} for key in keys]
    found = overviews(maps)
    assert [(o["title"], o["unit"], o["layers"], o["heads"]) for o in found] == [("Attention", "block", [0, 1], [0, 1])]
    # A layer without a head has None there; a kind with one map alone (cross attention) has no overview.
    assert found[0]["grid"] == [["attention_b0_h0", "attention_b0_h1"], [None, "attention_b1_h1"]]


def test_the_transformers_case_opens_with_an_overview_of_each_attention(client):
    page = text(client.get("/models/transformer"))
    titles = re.findall(r'<span class="chart-title">(\w+ attention): every layer and head at once</span>', page)
    assert titles == ["Encoder attention", "Decoder attention", "Cross attention"]


def test_an_ops_recorded_name_reads_as_words():
    from app.domain.graphlayout import in_words

    assert in_words({"id": "add@encoder#1", "op": "torch.add"}, "Bert") == "the 2nd torch.add in encoder's forward"
    assert in_words({"id": "cat@Bert#0", "op": "torch.cat"}, "Bert") == "the 1st torch.cat in the model's own forward"
    assert in_words({"id": "python@encoder.attention#11", "op": "Python"}, "Bert") == \
        "the 12th Python in encoder.attention's forward"
    assert in_words({"id": "encoder.attention", "op": "Module"}, "Bert") is None


def _path(client) -> list[dict]:
    """The catalog's path through the milestones, worked out here from the manifests: by year, then name, then
    slug."""
    listed = [client.get(f"/api/models/{m['slug']}").get_json() for m in client.get("/api/models").get_json()["models"]]
    return sorted(listed, key=lambda m: (m["milestone"]["year"], m["milestone"]["name"], m["slug"]))


def test_every_page_links_the_milestones_before_and_after_it_on_the_path(client):
    path = _path(client)
    assert len(path) > 2
    for at, manifest in enumerate(path):
        page = client.get(f"/models/{manifest['slug']}").get_data(as_text=True)
        nav = re.search(r'<nav class="path-nav".*?</nav>', page, re.S)
        before = path[at - 1] if at else None
        after = path[at + 1] if at + 1 < len(path) else None
        links = re.findall(r'rel="(prev|next)" href="/models/([^"]+)"', nav.group(0)) if nav else []
        expected = ([("prev", before["slug"])] if before else []) + ([("next", after["slug"])] if after else [])
        assert links == expected, manifest["slug"]
        if after:  # what the next one adds: the question it answers
            adds = re.search(r'<p class="path-adds[^"]*"[^>]*>(.*?)</p>', nav.group(0), re.S).group(1)
            assert html.unescape(adds) == after["question"]


def test_a_model_with_random_weights_says_so_first_and_points_to_its_trained_twin(client):
    path = _path(client)
    weights = {m["slug"]: read_metadata(PROJECT_ROOT / "recipes" / m["slug"]).get("weights", {}).get("state")
               for m in path}
    assert "random" in weights.values()
    for manifest in path:
        page = client.get(f"/models/{manifest['slug']}").get_data(as_text=True)
        notice = re.search(r'<p class="notice random-weights".*?</p>', page, re.S)
        if weights[manifest["slug"]] != "random":
            assert notice is None, manifest["slug"]
            continue
        twins = [m["slug"] for m in path if m["milestone"]["name"] == manifest["milestone"]["name"]
                 and weights[m["slug"]] not in (None, "random")]
        assert twins and notice and "predictions mean nothing" in notice.group(0)
        assert re.findall(r'href="/models/([^"]+)"', notice.group(0)) == twins
        assert page.index('id="random-weights"') < page.index('id="lab"')  # at the top, before the lab


def test_a_page_links_a_milestone_added_to_the_catalog_after_it_was_rendered(tree, tree_app):
    """A page's neighbours are other models: a new one between them is linked at once, never a copy rendered
    before it came."""
    tree.copy("mlp")
    tree.copy("lenet")
    app = tree_app(CATALOG_RELOAD_SECONDS=0.01)
    client = app.test_client()
    assert 'rel="next" href="/models/lenet"' in client.get("/models/mlp").get_data(as_text=True)
    tree.copy("lstm")  # 1997: between back-propagation (1986) and LeNet (1998)
    page = eventually(lambda: client.get("/models/mlp").get_data(as_text=True), lambda html: "/models/lstm" in html)
    assert 'rel="next" href="/models/lstm"' in page


def test_every_recorded_case_says_its_outcome_first_and_small_numbers_as_about_zero(app, client):
    """Where a model's lab kind reads a case, the case opens with what the model answered (right or not, how sure),
    random weights saying their answer means nothing; bars and metric cards say a number below 1e-4 as "about 0",
    its exact value kept in the title and the tables."""
    with app.app_context():
        from app.services.extensions import models

        said = {(slug, case["id"]): model.outcome(case) for slug, model in models.catalog.models.items()
                for case in model.manifest["experiment"]["cases"]}
        labless = {slug for slug, model in models.catalog.models.items() if model.lab is None}
    unsaid = [key for key, outcome in said.items() if not outcome and key[0] not in labless]
    assert not unsaid, f"recorded cases that open with no outcome: {unsaid}"
    for (slug, case_id), outcome in said.items():
        page = text(client.get(f"/models/{slug}?case={case_id}"))
        shown = re.search(r'<p class="outcome" id="case-outcome">(.*?)</p>\s*<p class="case-note">', page, re.S)
        assert (shown.group(1) if shown else None) == (str(escape(outcome)) if outcome else None), (slug, case_id)
    assert said["lenet", "misread"] == "Read as “3” with probability 0.77: wrong, the digit is “2”."
    assert said["bert", "mask-a"].endswith("The weights are random, so this answer means nothing.")
    assert not said["bert-mlm", "noun"].endswith("means nothing.")
    assert said["gpt2", "pi"] == "After “3 1 4 1 =” it predicts “1” next, with probability 1."
    assert said["mamba", "test-split"].startswith("Right on 3,993 of the 4,000 held-out answers")
    lenet = text(client.get("/models/lenet?case=zero"))
    assert '<span class="bar-value" title="6.287e-17">about 0</span>' in lenet
    assert "6.287095433550144e-17" in text(client.get("/models/lenet/cases/zero.csv"))  # the download keeps it


def test_every_node_of_every_graph_has_a_plain_name(app, client):
    """Each node the graph draws says what it is in a learner's words beside its path (the recipe's [names], else
    the rule for torch's common modules and ops), and each tour step names its node so."""
    with app.app_context():
        from app.services.extensions import models

        slugs = list(models.catalog.models)
    for slug in slugs:
        layers = client.get(f"/models/{slug}/graph.json").get_json()["layers"]
        unnamed = [layer["id"] for layer in layers if not layer["shown"].get("plain")]
        assert unnamed == [], slug
        page = text(client.get(f"/models/{slug}"))
        for target in re.findall(r'data-target="([^"]+)"', page):
            named = rf"On the graph: [^<]+ · <code>{re.escape(html.escape(target))}</code>"
            assert re.search(named, page), (slug, target)
