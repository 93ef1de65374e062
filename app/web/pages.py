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

from ..domain.catalog import GRAPH_FILE, Model, file_listing
from ..domain.graphlayout import default_focus, open_path
from ..domain.interventions import ACTIONS
from ..domain.lru import SizedLRU
from ..services import checkpoints
from ..services.cache import cache
from ..services.extensions import models
from ..services.parts import parts
from .downloads import content_disposition
from .response_cache import cacheable

bp = Blueprint("pages", __name__)
LAYER_TABLE_ROWS = 400  # the page's table of layers stops here; layers.csv and the graph file hold them all


@bp.app_template_filter("sig")
def significant(value: float, digits: int = 4) -> str:
    """A number to `digits` significant digits, positional (0.00005626, not 5.626e-05)."""
    return np.format_float_positional(value, precision=digits, unique=True, fractional=False, trim="-")


@bp.app_template_filter("abs_max")
def abs_max(values: list[float]) -> float:
    return max(abs(v) for v in values)


@bp.app_template_test("http_url")
def http_url(value) -> bool:
    """Only http(s) links become links: a recording could carry javascript: or data: URLs."""
    return isinstance(value, str) and urlsplit(value).scheme.lower() in ("http", "https") and "//" in value


@bp.app_template_test("all_integers")
def all_integers(values: list) -> bool:
    """Token ids and position flags (drawn as chips) rather than measurements (drawn as bars)."""
    return all(isinstance(v, int) for v in values)


def lab_settings(model: Model) -> dict:
    """What the lab panel needs, from the recipe's declaration: sizes, token names, the recorded cases as
    run requests, and each endpoint's URL and fields."""
    spec = model.lab
    return {
        "kind": spec.kind.name,
        "sizes": spec.sizes,
        "special": {str(v): k for k, v in spec.special.items()},
        "names": spec.token_names(),
        "presets": spec.kind.presets(model.manifest["experiment"]["cases"], spec),
        "endpoints": {name: {"url": url_for("api.lab_endpoint", slug=model.slug, action=name),
                             "method": e.method,
                             "fields": {f: field.json_schema() for f, field in e.fields.items()}}
                      for name, e in spec.endpoints.items()},
    }


def page_model(slug: str) -> Model:
    return models.get_or_404(slug)


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
    """The catalog: a card per model, grouped by category, filtered by ?tag=."""
    tag = request.args.get("tag", "")
    listed = sorted(models.catalog.models.values(), key=lambda m: (m.manifest["category"], m.manifest["title"]))
    all_tags = sorted({t for m in listed for t in m.manifest["tags"]}, key=str.lower)
    shown = [m for m in listed if not tag or tag in m.manifest["tags"]]
    by_category = groupby(shown, key=lambda m: m.manifest["category"])
    groups = [(category, list(items)) for category, items in by_category]
    weights = {m.slug: checkpoints.status(m.checkpoint) for m in shown if m.checkpoint}
    return render_template("index.html", groups=groups, tags=all_tags, tag=tag, weights=weights,
                           unknown_tag=bool(tag) and tag not in all_tags,
                           unavailable=list(models.catalog.unavailable.values()))


PAGES_BYTES = 32 * 2**20  # rendered model pages kept per process; a page depends only on the catalog and its key


def remembered(model: Model, key: tuple, render) -> Response:
    """The page rendered for this key, as bytes with a content-hash ETag (the compressed body is then found
    by that ETag without hashing). Kept in this process while the catalog stays the same, and in the app's
    cache (services/cache.py, shared by the host's processes or the machines) under a key naming its
    content: the model's recording and recipe hashes, the page version (templates, code, assets) and `key`.
    Rendering is most of a page's cost."""
    memo = models.catalog.derived("pages", lambda: {"pages": SizedLRU(PAGES_BYTES), "rendering": Lock()})
    page = memo["pages"].get(key)
    if page is None:
        # One render at a time: requests that arrive together for a page not yet rendered wait for the
        # first one instead of each rendering it (rendering is CPU work under the GIL anyway).
        with memo["rendering"]:
            page = memo["pages"].get(key)
            if page is None:
                shared = f"page:{model.slug}:{model.etag}:{model.recipe_sha256}:{parts().pages}:{json.dumps(key)}"
                html = cache.get(shared)
                if html is None:
                    html = render()
                    cache.set(shared, html)
                body = html.encode()
                page = (body, hashlib.sha256(body).hexdigest()[:32])
                memo["pages"].put(key, page, len(body))
    response = Response(page[0], mimetype="text/html")
    response.set_etag(page[1])
    return response


def has_checkpoint(slug: str) -> bool:
    """Whether the model's page shows its checkpoint's state, looked at on disk at every request."""
    model = models.get(slug)
    return model is not None and model.checkpoint is not None


@bp.get("/models/<slug>")
@cacheable(unless=has_checkpoint)
def model_page(slug: str):
    """The model page; ?case= and ?step= choose the recorded case and the tour step shown."""
    model = page_model(slug)
    checkpoint = checkpoints.status(model.checkpoint) if model.checkpoint else None
    key = (slug, request.args.get("case"), request.args.get("step"), repr(checkpoint))
    return remembered(model, key, lambda: render_model_page(model, checkpoint))


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


def render_model_page(model: Model, checkpoint: dict | None = None) -> str:
    m = model.manifest
    cases = m["experiment"]["cases"]
    steps = m["steps"]
    case_id = request.args.get("case", cases[0]["id"] if cases else None)
    case = model.case(case_id) if case_id else None
    case = case or (cases[0] if cases else None)  # a recording made without its checkpoint has no case
    step_id = request.args.get("step", m.get("openingStep") or steps[0]["id"])
    step = next((s for s in steps if s["id"] == step_id), steps[0])
    notices = []
    if case_id and (case is None or case["id"] != case_id):
        shown = f"showing “{case['label']}”" if case else "this recording holds none"
        notices.append(f"There is no recorded case “{case_id}”; {shown}.")
    if step["id"] != step_id:
        notices.append(f"There is no tour step “{step_id}”; showing “{step['title']}”.")
    layers = {layer["id"]: layer for layer in m["layers"]}
    if checkpoint and checkpoint["available"] and not cases:  # for the operator, not for a web reader
        current_app.logger.info("%s: a checkpoint is on this server but the recording holds no case; "
                                "`flask --app wsgi record %s` records its cases", model.slug, model.slug)
    return render_template(
        "model.html", model=model, m=m, case=case, step=step, layers=layers, notices=notices, graph_file=GRAPH_FILE,
        graph_open=open_path(m, model.graph_focus or default_focus(m)), table_rows=LAYER_TABLE_ROWS,
        lab=lab_settings(model) if model.has_lab else None, checkpoint=checkpoint,
        files=file_listing(model), whatif=whatif_settings(model), training=training_settings(model),
    )


def whatif_settings(model: Model) -> dict | None:
    """What the What if? panel needs: the API's URL, the actions, the heads each attention module has (a
    number, or null where the recipe reads it from the module), and the recorded cases it runs and patches
    from (without any, it runs the lab's input and has nothing to patch from)."""
    if not model.has_lab:  # interventions run a recorded case or a lab request through the lab's recipe
        return None
    cases = model.manifest["experiment"]["cases"]
    return {"url": url_for("api.interventions_of", slug=model.slug),
            "actions": [a for a in ACTIONS if cases or a != "patch"],
            "heads": {node: h.count if isinstance(h.count, int) else None for node, h in model.heads.items()},
            "cases": [{"id": c["id"], "label": c["label"]} for c in cases]}


def training_settings(model: Model) -> dict | None:
    """What the training panel needs: the API's URL and the stages of weights the recipe kept, in order."""
    if model.training is None or not model.manifest["experiment"]["cases"]:  # it runs the case shown
        return None
    return {"url": url_for("api.training_of", slug=model.slug), "stages": list(model.training.stages)}


@bp.get("/models/<slug>/graph.json")
@cacheable()
def graph_json(slug: str):
    """The recorded graph as the interactive graph draws it: every layer with its node's text, and the edges."""
    model = page_model(slug)
    return Response(model.drawing, content_type="application/json")


@bp.get("/models/<slug>/layers.csv")
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


@bp.get("/models/<slug>/cases/<case_id>")
def case_fragment(slug: str, case_id: str):
    """One recorded case as an HTML fragment, for switching cases without reloading the page."""
    model = page_model(slug)
    return render_template("_case.html", model=model, m=model.manifest, case=find_case(model, case_id))


@bp.get("/models/<slug>/cases/<case_id>.json")
def case_json(slug: str, case_id: str):
    """One recorded case's numbers as JSON."""
    model = page_model(slug)
    case = find_case(model, case_id)
    response = jsonify(model=slug, revision=model.revision, experiment=model.manifest["experiment"]["title"],
                       case=case)
    response.headers["Content-Disposition"] = content_disposition("attachment", f"{slug}-{case_id}.json")
    return response


@bp.get("/models/<slug>/cases/<case_id>.csv")
def case_csv(slug: str, case_id: str):
    """One recorded case's numbers as CSV, one value per row."""
    model = page_model(slug)
    case = find_case(model, case_id)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["case", "kind", "label", "row", "column", "value"])
    for matrix in case.get("matrices", []):
        for i, row in enumerate(matrix["values"]):
            for j, value in enumerate(row):
                writer.writerow([case_id, "matrix", matrix["label"], i, j, repr(value)])
    for vector in case.get("vectors", []):
        for i, value in enumerate(vector["values"]):
            writer.writerow([case_id, "vector", vector["label"], "", i, repr(value)])
    for metric in case.get("metrics", []):
        writer.writerow([case_id, "metric", metric["label"], "", "", repr(metric["value"])])
    return Response(out.getvalue(), content_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": content_disposition("attachment", f"{slug}-{case_id}.csv")})
