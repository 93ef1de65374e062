"""The browser pages: the catalog, the model page, and each recorded case as a fragment or export."""

import csv
import hashlib
import io
import json
from itertools import groupby
from threading import Lock
from urllib.parse import urlsplit

import numpy as np
from flask import Blueprint, Response, abort, current_app, jsonify, render_template, request, url_for
from markupsafe import Markup, escape

from ..build.variants import is_variant, kept, model_or_404, split
from ..domain import caches, tour
from ..domain.catalog import GRAPH_FILE, Model, file_listing
from ..domain.envelopes import amplified, described
from ..domain.glossary import GLOSSARY
from ..domain.graphlayout import default_focus, open_path
from ..domain.interventions import ACTIONS, changeable
from ..domain.labs.cases import ATTENTION_TITLES
from ..domain.numbers import in_prose, significant
from ..domain.schema import ITEMS
from ..services import checkpoints
from ..services.cache import cache
from ..services.extensions import models
from ..services.parts import parts
from ..services.retraining import trained_here
from .downloads import content_disposition
from .response_cache import cacheable

bp = Blueprint("pages", __name__)
LAYER_TABLE_ROWS = 400  # the page's table of layers stops here; layers.csv and the graph file hold them all


bp.add_app_template_filter(significant, "sig")  # tables: every value (numbers.significant)
bp.add_app_template_filter(in_prose, "prose")  # prose, bars and metric cards: "about 0" below 1e-4 (numbers.in_prose)


@bp.app_template_filter("inline_code")
def inline_code(text: str) -> Markup:
    """Text whose `backticked` spans are code (a command to run), escaped and drawn as code rather than shown with
    their backticks; text with an unpaired backtick stays as it is."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:
        return escape(text)
    return Markup("".join(f"<code>{part}</code>" if index % 2 else part for index, part in enumerate(parts)))


@bp.app_template_filter("abs_max")
def abs_max(values: list[float]) -> float:
    return max(abs(v) for v in values)


@bp.app_template_test("http_url")
def http_url(value) -> bool:
    """Only http(s) links become links: a recording could carry javascript: or data: URLs."""
    return isinstance(value, str) and urlsplit(value).scheme.lower() in ("http", "https") and "//" in value


@bp.app_template_test("distribution")
def distribution(values: list) -> bool:
    """Probabilities over some outcomes (each 0 to 1, summing to 1): drawn on a 0-1 scale of their own, never on a
    scale shared with logits or losses, where a probability of 1 would be a sliver."""
    numbers = [v for v in values if isinstance(v, int | float)]
    return len(numbers) == len(values) > 1 and all(0 <= v <= 1 for v in numbers) and abs(sum(numbers) - 1) < 1e-3


@bp.app_template_test("all_integers")
def all_integers(values: list) -> bool:
    """Token ids and position flags (drawn as chips) rather than measurements (drawn as bars)."""
    return all(isinstance(v, int) for v in values)


def lab_settings(model: Model) -> dict:
    """What the lab panel needs, from the recipe's declaration: sizes, token names, the recorded cases as
    run requests, each endpoint's URL and fields, and the titles of an attention map's axes."""
    spec = model.lab
    return {
        "kind": spec.kind.name,
        "sizes": spec.sizes,
        "special": {str(v): k for k, v in spec.special.items()},
        "names": spec.token_names(),
        "names_hint": spec.names_hint(),  # what a reader may type, in words (the hint and a refusal say it)
        "words": spec.words,
        "attention_titles": ATTENTION_TITLES,  # the axes of a map a lab draws from its own answer
        "presets": spec.kind.presets(model.manifest["experiment"]["cases"], spec),
        "endpoints": {name: {"url": url_for("api.lab_endpoint", slug=model.slug, action=name),
                             "method": e.method,
                             "fields": {f: field.json_schema() for f, field in e.fields.items()}}
                      for name, e in spec.endpoints.items()},
        # Where a lab runs its input again with a head switched off (What if?), and the modules whose heads it
        # reaches, in the recorded graph's order: the n-th of them holds layer n's heads.
        "interventions": url_for("api.interventions_of", slug=model.slug),
        "head_modules": [layer["id"] for layer in model.manifest["layers"] if layer["id"] in model.heads],
    } | spec.kind.settings(spec)


def page_model(slug: str) -> Model:
    return model_or_404(slug)


def find_case(model: Model, case_id: str) -> dict:
    case = model.case(case_id)
    if case is None:
        abort(404, f"{model.slug!r} has no recorded case {case_id!r}")
    return case


def reads_a_checkpoint(**_) -> bool:
    """Whether the catalog's cards say if a checkpoint is on this server (read on disk at every request)."""
    return any(m.checkpoint for m in models.catalog.models.values())


@bp.get("/")
@cacheable(unless=reads_a_checkpoint)
def index():
    """The catalog: a card per model, grouped by category, each group a timeline by year, filtered by ?tag=."""
    tag = request.args.get("tag", "")
    listed = sorted(models.catalog.models.values(),
                    key=lambda m: (m.manifest["category"], m.manifest["milestone"]["year"], m.manifest["title"]))
    all_tags = sorted({t for m in listed for t in m.manifest["tags"]}, key=str.lower)
    shown = [m for m in listed if not tag or tag in m.manifest["tags"]]
    by_category = groupby(shown, key=lambda m: m.manifest["category"])
    groups = [(category, list(items)) for category, items in by_category]
    found = {m.slug: checkpoints.status(m.checkpoint) for m in shown if m.checkpoint}
    path = models.catalog.path()
    names = [m.manifest["milestone"]["name"] for m in path]
    repeated = {name for name in names if names.count(name) > 1}  # told apart on the path by their weights
    return render_template("index.html", groups=groups, tags=all_tags, tag=tag, checkpoints=found, path=path,
                           repeated=repeated,
                           unknown_tag=bool(tag) and tag not in all_tags,
                           unavailable=list(models.catalog.unavailable.values()))




def remembered(model: Model, key: tuple, render) -> Response:
    """The page rendered for this key, as bytes with a content-hash ETag (the compressed body is then found
    by that ETag without hashing). Kept in this process while the catalog stays the same, and in the app's
    cache (services/cache.py, shared by the host's processes or the machines) under a key naming its
    content: the model's recording and recipe hashes, the page version (templates, code, assets) and `key`.
    Rendering is most of a page's cost."""
    kept = models.catalog.derived("pages", lambda: {"pages": caches.lru("pages"), "rendering": Lock()})
    page = kept["pages"].get(key)
    if page is None:
        # One render at a time: requests that arrive together for a page not yet rendered wait for the
        # first one instead of each rendering it (rendering is CPU work under the GIL anyway).
        with kept["rendering"]:
            page = kept["pages"].get(key)
            if page is None:
                shared = f"page:{model.slug}:{model.etag}:{model.recipe_sha256}:{parts().pages}:{json.dumps(key)}"
                html = cache.get(shared)
                if html is None:
                    html = render()
                    cache.set(shared, html)
                body = html.encode()
                page = (body, hashlib.sha256(body).hexdigest()[:32])
                kept["pages"].put(key, page, len(body))
    response = Response(page[0], mimetype="text/html")
    response.set_etag(page[1])
    return response


def reads_more(slug: str) -> bool:
    """Whether the model's page reads more than the catalog: a checkpoint's state, looked at on disk at every
    request, or a variant's, kept in the shared state until it goes to make room."""
    model = models.get(slug)
    return is_variant(slug) or model is not None and model.checkpoint is not None


@bp.get("/models/<model:slug>")
@cacheable(unless=reads_more)
def model_page(slug: str):
    """The model page; ?case= and ?step= choose the recorded case and the tour step shown."""
    model = page_model(slug)
    checkpoint = checkpoints.status(model.checkpoint) if model.checkpoint else None
    case, step, notices = shown(model, request.args.get("case"), request.args.get("step"))
    # Keyed by what is shown, not by what was asked: an unknown ?case= is the page shown instead, rendered once,
    # with its notice set in, so no query string makes the server render again.
    # The neighbours on the path and a random model's trained twins are other models' pages: named by their hashes.
    # A variant's page shows its model's recorded outcomes beside its own: named by that model's hash too.
    found = split(slug)
    of = models.get(found[0]) if found else None
    around = [(m.slug, m.etag) if m else None for m in (*models.catalog.neighbours(model),
                                                          *models.catalog.trained_twins(model), of)]
    key = (slug, case and case["id"], step["id"], repr(checkpoint), repr(around))
    page = remembered(model, key, lambda: render_model_page(model, case, step, checkpoint))
    return with_notices(page, notices) if notices else page


NOTICES = b"<!-- notices -->"  # where model.html takes the notices of a page shown instead of the one asked for


def with_notices(page: Response, notices: list[str]) -> Response:
    """A rendered page with these notices set in (escaped), and the ETag of what it now holds."""
    html = "".join(f'<p class="notice" role="status">{escape(n)}</p>' for n in notices).encode()
    body = page.get_data().replace(NOTICES, html, 1)
    page.set_data(body)
    page.set_etag(hashlib.sha256(body).hexdigest()[:32])
    return page


def shown(model: Model, case_id: str | None, step_id: str | None) -> tuple[dict | None, dict, list[str]]:
    """The case and the tour step a page shows for what was asked, and a notice for each that it could not."""
    m = model.manifest
    cases = m["experiment"]["cases"]
    case = model.case(case_id) if case_id is not None else None
    case = case or (cases[0] if cases else None)  # a recording made without its checkpoint has no case
    steps = model.tour_steps
    step = next((s for s in steps if s["id"] == step_id), steps[0])  # a page opens on the overview
    notices = []
    if case_id is not None and (case is None or case["id"] != case_id):
        instead = f"showing “{case['label']}”" if case else "this recording holds none"
        notices.append(f"There is no recorded case “{case_id[:100]}”; {instead}.")
    if step_id is not None and step["id"] != step_id:
        notices.append(f"There is no tour step “{step_id[:100]}”; showing “{step['title']}”.")
    return case, step, notices


def prerender(app) -> None:
    """Render every model's page as first shown, so that a new worker's first visitors do not wait for it. A
    page that cannot be rendered is logged and left to its requests (which answer the error page): it never
    keeps a worker from starting, which would stop the whole server."""
    with app.app_context():
        slugs = list(models.catalog.models)
    for slug in slugs:
        with app.test_request_context(f"/models/{slug}"):
            try:
                model_page(slug)
            except Exception:
                app.logger.exception("the page of model %s could not be rendered ahead of its first request", slug)


MAX_SIDE = 64  # rows and columns a heatmap and its table show; a larger matrix is drawn as block means


# A case's figures drawn open before the rest are folded: this many matrix figures and this many charts (bars,
# curves); rows of chips (token ids) always show. With two of each, pages were 10-15k px tall on a phone.
SHOWN_FIGURES = 1


def split_vectors(vectors: list[dict]) -> tuple[list[dict], list[dict]]:
    """A case's vectors as its page shows them at first, and those folded under "more figures": every row of chips,
    and the first SHOWN_FIGURES charts (bars, curves); the order kept."""
    shown, folded, charts = [], [], 0
    for vector in vectors:
        chart = not all_integers(vector["values"])
        (folded if chart and charts >= SHOWN_FIGURES else shown).append(vector)
        charts += chart
    return shown, folded


def drawn(model: Model, case: dict | None) -> dict | None:
    """The case as its page draws it: its outcome in a sentence (Model.outcome, read from the case as recorded), and
    a matrix with more than MAX_SIDE rows or columns as the means of equal blocks, with its true size, range and the
    blocks' index ranges (`summary`), so that a recording of any size makes a page of bounded size; every value
    stays in the case's CSV and JSON exports."""
    if case is None:
        return None
    outcome = model.outcome(case)
    matrices = []
    for matrix in case.get("matrices", []):
        values = np.asarray(matrix["values"], dtype=np.float64)
        rows, cols = values.shape
        if rows <= MAX_SIDE and cols <= MAX_SIDE:
            matrices.append(matrix)
            continue
        block = (-(-rows // MAX_SIDE), -(-cols // MAX_SIDE))
        padded = np.full((-(-rows // block[0]) * block[0], -(-cols // block[1]) * block[1]), np.nan)
        padded[:rows, :cols] = values
        means = np.nanmean(padded.reshape(padded.shape[0] // block[0], block[0], -1, block[1]), axis=(1, 3))
        spans = [[f"{i}–{min(i + size, whole) - 1}" for i in range(0, whole, size)]
                 for whole, size in ((rows, block[0]), (cols, block[1]))]
        matrices.append(matrix | {"values": means.tolist(), "summary": {
            "rows": rows, "cols": cols, "block": block, "min": float(values.min()), "max": float(values.max()),
            "row_spans": spans[0], "col_spans": spans[1]}})
    shown, folded = split_vectors(case.get("vectors", []))
    notes = [(item["label"], amplified(item)) for _, group, _ in ITEMS for item in case.get(group, [])]
    return case | {"outcome": outcome, "matrices": matrices, "shown_vectors": shown, "folded_vectors": folded,
                   "shown_figures": SHOWN_FIGURES,
                   "rounding": [{"label": label, "note": note} for label, note in notes if note]}


def render_model_page(model: Model, case: dict | None, step: dict, checkpoint: dict | None = None) -> str:
    m = model.manifest
    cases = m["experiment"]["cases"]
    layers = {layer["id"]: layer for layer in m["layers"]}
    if checkpoint and checkpoint["available"] and not cases:  # for the operator, not for a web reader
        current_app.logger.info("%s: a checkpoint is on this server but the recording holds no case; "
                                "`flask --app wsgi record %s` records its cases", model.slug, model.slug)
    if checkpoint:  # whether the cases were recorded from the very files this server reads
        recorded = (m["provenance"].get("checkpoint") or {}).get("files")
        checkpoint = checkpoint | {"recorded": recorded,
                                   "matches": checkpoint["available"] and recorded == checkpoint["files"]}
        if cases and checkpoint["available"] and not checkpoint["matches"]:
            current_app.logger.info("%s: the recording's cases were made with other checkpoint files than this "
                                    "server reads; `flask --app wsgi record %s` records them with these", model.slug,
                                    model.slug)
    return render_template(
        "model.html", model=model, m=m, case=drawn(model, case), step=step, steps=model.tour_steps,
        key_step=tour.key_step(m),
        layers=layers, graph_file=GRAPH_FILE, table_rows=LAYER_TABLE_ROWS,
        # The overview shows the model at block level; a step's link opens the graph around the recipe's focus.
        graph_open=[] if step["id"] == tour.OVERVIEW else open_path(m, model.graph_focus or default_focus(m)),
        lab=lab_settings(model) if model.has_lab else None, checkpoint=checkpoint,
        files=file_listing(model), whatif=whatif_settings(model), training=training_settings(model),
        retraining={"url": url_for("api.retrain", slug=model.slug)} if trained_here(model) else None,
        glossary=GLOSSARY | model.glossary, rounding=described(m), neighbours=models.catalog.neighbours(model),
        twins=models.catalog.trained_twins(model), variants=variant_settings(model),
        variant=variant_beside(model),
    )


def variant_settings(model: Model) -> dict | None:
    """The "Train your own" panel, where the recipe declares knobs and trains its model, on the page of a model whose
    lab draws it as it learns (the MLP's plane) and on a variant's: each knob (a variant's page starts from the
    variant's own values) and where to start a variant."""
    found = split(model.slug)
    watched = bool(model.lab and model.lab.kind.watches_training)
    if not model.knobs or not trained_here(model) or not (watched or found):
        return None  # elsewhere a variant is trained through the API (POST .../variants): the page stays as short
    slug = found[0] if found else model.slug
    variant = kept(*found) if found else None
    values = variant.knobs if variant else {}
    return {"url": url_for("api.start_variant", slug=slug),
            "knobs": [{"name": knob.name, "description": knob.description, "value": values.get(knob.name, knob.default),
                       "default": knob.default, "min": knob.minimum, "max": knob.maximum,
                       "step": knob.step or (1 if knob.integer else None), "choices": list(knob.choices)}
                      for knob in model.knobs.values()]}


def variant_beside(model: Model) -> dict | None:
    """On a variant's page, the variant beside the recorded model: its knobs, how long it trained, each case's outcome
    beside the recorded one's, and each curve the recipe draws (the loss, step by step) over the recorded one."""
    found = split(model.slug)
    variant = kept(*found) if found else None
    recorded = models.get(found[0]) if found else None
    if variant is None or recorded is None:
        return None
    rows, curves = [], []
    for case in model.manifest["experiment"]["cases"]:
        other = recorded.case(case["id"])
        rows.append({"label": case["label"], "id": case["id"], "variant": model.outcome(case),
                     "recorded": recorded.outcome(other) if other else None})
        for vector in case.get("vectors", []):
            shown = model.display.curves.get(vector["key"])
            theirs = next((v for v in (other or {}).get("vectors", []) if v["key"] == vector["key"]), None)
            if shown and theirs:
                curves.append({"label": vector["label"], "variant": vector["values"], "recorded": theirs["values"],
                               "first": vector.get("first", 0)} | shown)
    return {"of": recorded, "knobs": variant.knobs, "moved": variant.moved, "train_seconds": variant.train_seconds,
            "record_seconds": variant.record_seconds, "created_at": variant.public()["created_at"],
            "failed_checks": model.manifest["provenance"].get("failedChecks", []), "cases": rows, "curves": curves}


def whatif_settings(model: Model) -> dict | None:
    """What the What if? panel needs: the API's URLs (the changes, and what each node can do on a run), the nodes
    it may change, the actions, the heads each attention module has (a number, or null where the recipe reads it
    from the module), the recorded cases it runs and patches from (without any, it runs the lab's input and has
    nothing to patch from) and their numbers' keys in the order the recording gives them (an answer's outcome is
    told in that order: a prediction, its probability, a loss). A model without a lab runs its recorded cases;
    one without a lab nor a case has nothing to run."""
    cases = model.manifest["experiment"]["cases"]
    if not model.has_lab and not cases:
        return None
    return {"url": url_for("api.interventions_of", slug=model.slug),
            "options": url_for("api.intervention_options", slug=model.slug), "nodes": changeable(model.manifest),
            "actions": [a for a in ACTIONS if cases or a != "patch"],
            "heads": {node: h.count if isinstance(h.count, int) else None for node, h in model.heads.items()},
            "cases": [{"id": c["id"], "label": c["label"]} for c in cases], "lab": model.has_lab,
            "numbers": recorded_numbers(model)}


def recorded_numbers(model: Model) -> list[str]:
    """The keys of the recorded cases' numbers (metrics) in the order the recording gives them: a panel's outcome is
    told in that order (a prediction, its probability, a loss), not in the answer's alphabetical one."""
    return list(dict.fromkeys(m["key"] for c in model.manifest["experiment"]["cases"] for m in c.get("metrics", [])))


def training_settings(model: Model) -> dict | None:
    """What the training panel needs: the API's URL, the stages of weights the recipe kept, in order, and the
    recorded numbers' order."""
    if model.training is None or not model.manifest["experiment"]["cases"]:  # it runs the case shown
        return None
    return {"url": url_for("api.training_of", slug=model.slug), "stages": list(model.training.stages),
            "numbers": recorded_numbers(model)}


@bp.get("/models/<model:slug>/graph.json")
@cacheable(unless=is_variant)
def graph_json(slug: str):
    """The recorded graph as the interactive graph draws it: every layer with its node's text, and the edges."""
    model = page_model(slug)
    return Response(model.drawing, content_type="application/json")


@bp.get("/models/<model:slug>/layers.csv")
def layers_csv(slug: str):
    """Every layer and op of the recorded graph as CSV: id, op, parameters, parent, source lines."""
    model = page_model(slug)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "label", "kind", "op", "params", "parent", "module", "line", "end_line", "call_line",
                     "call_end_line"])
    for layer in model.manifest["layers"]:
        source, call = layer.get("source") or {}, layer.get("callSource") or {}
        writer.writerow([layer["id"], layer.get("label", ""), layer["kind"], layer["op"],
                         json.dumps(layer.get("params") or {}, ensure_ascii=False), layer.get("parent") or "",
                         layer.get("module", ""), source.get("line", ""), source.get("endLine", ""),
                         call.get("line", ""), call.get("endLine", "")])
    return Response(out.getvalue(), content_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": content_disposition("attachment", f"{slug}-layers.csv")})


@bp.get("/models/<model:slug>/cases/<case_id>")
def case_fragment(slug: str, case_id: str):
    """One recorded case as an HTML fragment, for switching cases without reloading the page."""
    model = page_model(slug)
    return render_template("_case.html", model=model, m=model.manifest, case=drawn(model, find_case(model, case_id)))


@bp.get("/models/<model:slug>/cases/<case_id>.json")
def case_json(slug: str, case_id: str):
    """One recorded case's numbers as JSON."""
    model = page_model(slug)
    case = find_case(model, case_id)
    response = jsonify(model=slug, revision=model.revision, experiment=model.manifest["experiment"]["title"],
                       case=case)
    response.headers["Content-Disposition"] = content_disposition("attachment", f"{slug}-{case_id}.json")
    return response


@bp.get("/models/<model:slug>/cases/<case_id>.csv")
def case_csv(slug: str, case_id: str):
    """One recorded case's numbers as CSV, one value per row, with each item's key and each row's and column's
    name where the recording or the lab names them."""
    model = page_model(slug)
    case = find_case(model, case_id)
    axes = model.axes(case)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["case", "kind", "label", "row", "column", "value", "key", "row_name", "column_name"])
    for matrix in case.get("matrices", []):
        rows, columns = (axes.get(matrix["key"], {}).get(axis) for axis in ("rows", "columns"))
        for i, row in enumerate(matrix["values"]):
            for j, value in enumerate(row):
                writer.writerow([case_id, "matrix", matrix["label"], i, j, repr(value), matrix["key"],
                                 rows[i]["name"] if rows else "", columns[j]["name"] if columns else ""])
    for vector in case.get("vectors", []):
        names = vector.get("names")
        for i, value in enumerate(vector["values"]):
            writer.writerow([case_id, "vector", vector["label"], "", i, repr(value), vector["key"], "",
                             names[i] if names else ""])
    for metric in case.get("metrics", []):
        writer.writerow([case_id, "metric", metric["label"], "", "", repr(metric["value"]), metric["key"], "", ""])
    return Response(out.getvalue(), content_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": content_disposition("attachment", f"{slug}-{case_id}.csv")})
