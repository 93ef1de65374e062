"""The JSON API over the stored manifests, the model files and server-side verification."""

import json

import orjson
from flask import Blueprint, Response, abort, current_app, jsonify, request, url_for
from werkzeug.exceptions import MethodNotAllowed, RequestEntityTooLarge, ServiceUnavailable, UnsupportedMediaType
from werkzeug.routing import BaseConverter

from ..build.variants import is_variant, model_or_404
from ..domain.catalog import Model, file_listing
from ..domain.compare import compare_case, tolerance_for
from ..domain.labs import TAKEN
from ..domain.labs.fields import parse_query, validate
from ..domain.shapes import Links
from ..services import activations, budget, history, interventions, live, retraining, training_stages
from ..services.extensions import models
from ..services.jobs import Jobs
from ..services.retraining import retrainings
from ..services.state import encode
from ..services.verification import verifications
from .openapi import POST_ERRORS, documented, errors, found, json_body, openapi_document, ref, response_of
from .response_cache import cacheable

bp = Blueprint("api", __name__, url_prefix="/api")


@bp.record_once
def _converters(state) -> None:
    state.app.url_map.converters["action"] = ActionConverter


@bp.before_request
def limit_body() -> None:
    """Refuse oversized bodies before any work, even on endpoints that ignore the body; a body sent in
    chunks (no Content-Length) is read up to the limit and refused past it."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    if request.content_length is not None:
        if request.content_length > limit:
            abort(413, f"request body over {limit} bytes")
    elif request.method not in ("GET", "HEAD", "OPTIONS"):
        try:
            body = request.stream.read(limit + 1)
            # werkzeug's stream stops quietly at MAX_CONTENT_LENGTH and raises on the next read
            over = len(body) > limit or (len(body) == limit and request.stream.read(1) != b"")
        except RequestEntityTooLarge:
            over = True
        except Exception:  # a malformed chunked body (the server's reader raises its own error), a client gone
            abort(400, "body: cannot be read: a malformed chunked encoding, or the client stopped sending it")
        if over:
            abort(413, f"request body over {limit} bytes")
        request.environ["tensorviz.body"] = body


def spends_compute(view):
    """Mark a view that starts recipe runs: never readable cross-origin (no CORS header), never started by another
    site's page (a browser says so in Sec-Fetch-Site), and its body, where it sends one, declared JSON."""
    view.spends_compute = True
    return view


@bp.before_request
def no_compute_for_other_sites() -> None:
    """Another site's page can make its visitors' browsers send a GET or a form POST here without asking (no CORS
    preflight): a run it starts would spend this server's compute and the visitor's budget, so none is started.
    Scripts and this site's own pages are not refused (browsers mark a request from another site as such)."""
    view = current_app.view_functions.get(request.endpoint)
    if not getattr(view, "spends_compute", False) or request.method == "OPTIONS":
        return
    if request.headers.get("Sec-Fetch-Site", "").lower() in ("cross-site", "same-site"):
        abort(403, "another site's page cannot start a recipe run here; run it from this site or from a script")
    if request.method == "POST" and request.mimetype and request.mimetype != "application/json":
        raise UnsupportedMediaType(f"body: send JSON with Content-Type: application/json, not {request.mimetype}")


def get_model(slug: str) -> Model:
    """The model with this slug (or the variant at this path), or a 404 that says why it is missing."""
    return model_or_404(slug)


def model_links(model: Model) -> Links:
    slug = model.slug
    return {
        "self": url_for("api.model", slug=slug),
        "files": url_for("api.files", slug=slug),
        "verifications": url_for("api.verify", slug=slug),
        "latest_verification": url_for("api.latest_verification", slug=slug),
        "verification_history": url_for("api.verification_history", slug=slug),
        "page": f"/models/{slug}",
    } | ({"retrainings": url_for("api.retrain", slug=slug)} if retraining.trained_here(model) else {})


@bp.after_request
def options_without_body(response: Response) -> Response:
    """OPTIONS answers which methods a path takes (Allow), with no body to misread as HTML."""
    if request.method == "OPTIONS" and response.status_code == 200:
        response.status_code = 204
        response.set_data(b"")
        del response.headers["Content-Type"]
    return response


@bp.after_request
def etag_every_get(response: Response) -> Response:
    """Every successful GET answers with an ETag (conditional.py then honours If-None-Match and If-Match)."""
    if request.method in ("GET", "HEAD") and response.status_code == 200 and not response.is_streamed \
            and "ETag" not in response.headers:
        response.add_etag()
    return response


@bp.get("/models", endpoint="models")
@documented(lambda f: {"operationId": "listModels", "tags": ["catalog"], "summary": "The catalog",
                        "responses": found(ref("Catalog"), "Served models, and manifests that could not be loaded.")})
@cacheable()
def list_models():
    """The catalog: one entry per served model, and the manifests that could not be served."""
    entries = []
    for model in models.catalog.models.values():
        m = model.manifest
        entries.append({
            "slug": model.slug,
            "title": m["title"],
            "question": m["question"],
            "category": m["category"],
            "tags": m["tags"],
            "revision": model.revision,
            "milestone": m["milestone"],
            "links": model_links(model),
        })
    unavailable = [{"slug": u.slug, "reason": u.reason} for u in models.catalog.unavailable.values()]
    return jsonify(models=entries, unavailable=unavailable)


@bp.get("/models/<model:slug>")
@documented(lambda f: {"operationId": "getManifest", "tags": ["catalog"],
                        "summary": "The stored manifest, byte for byte", "parameters": [f.slug],
                        "responses": found(ref("Manifest"), "The manifest.")})
@cacheable(unless=is_variant)
def model(slug: str):
    """The stored manifest, byte for byte, with an ETag for conditional requests."""
    found = get_model(slug)
    response = Response(found.raw, mimetype="application/json")
    response.set_etag(found.etag)  # conditional_json answers If-None-Match with it
    return response


@bp.get("/models/<model:slug>/files")
@documented(lambda f: {"operationId": "listFiles", "tags": ["catalog"],
                        "summary": "Files with served and recorded hashes", "parameters": [f.slug],
                        "responses": found(ref("Files"), "The files.")})
def files(slug: str):
    """The model's files with the hash and size of what is served, beside what the manifest recorded."""
    found = get_model(slug)
    missing = [{"name": n, "recorded_sha256": r.get("sha256"), "note": "recorded but not served"}
               for n, r in found.manifest["files"].items() if n not in found.files]
    return jsonify(model=slug, revision=found.revision, files=file_listing(found), not_served=missing)


@bp.post("/models/<model:slug>/verifications")
@documented(lambda f: {
    "operationId": "startVerification", "tags": ["verification"],
    "summary": "Re-execute the recipe and compare with the recording", "parameters": [f.slug],
    "responses": {"200": response_of(ref("Report"), "The report (finished within the request, or kept)."),
                  "202": response_of(ref("Job"), "Running: poll the Location.", "Location", "Retry-After"),
                  **errors(403, 404, 413, 415)}})
@spends_compute
def verify(slug: str):
    """Re-execute the recipe and compare: 200 with the report, or 202 with a Location to poll."""
    found = get_model(slug)
    cached = verifications.cached(found)
    if cached is not None:  # a kept report of exactly this run starts nothing, so it spends no budget
        return Response(cached, mimetype="application/json")
    job = verifications.start(found)
    recorded = job.get("recorded", True)  # False: the shared store is down, so no poll could find the job
    wait = current_app.config["VERIFY_WAIT"] if recorded else current_app.config["RECIPE_TIMEOUT"] + 5
    report = verifications.wait(job["id"], float(wait))
    if report is not None:
        return Response(encode(report), mimetype="application/json")  # as a kept report is served: insertion order
    if not recorded:
        raise ServiceUnavailable("the shared state cannot be reached, so this verification could not be kept for "
                                 "polling and did not finish in time; try again shortly", retry_after=5)
    return _job_answer(verifications.public(job), 202)


@bp.get("/models/<model:slug>/verifications/latest")
@documented(lambda f: {"operationId": "getLatestVerification", "tags": ["verification"],
                        "summary": "The latest verification report", "parameters": [f.slug],
                        "responses": found(ref("Report"), "The report.")})
def latest_verification(slug: str):
    """The latest verification report of this model's current revision."""
    report = verifications.latest(get_model(slug))
    if report is None:
        abort(404, f"model {slug!r} has not been verified yet; POST to its verifications first")
    return jsonify(report)


def retrained_model(slug: str) -> Model:
    """The model with this slug, which its recipe trains; 404 for one that it does not."""
    found = get_model(slug)
    if not retraining.trained_here(found):
        abort(404, f"model {slug!r} is not trained by its recipe (no train.py): it cannot be retrained")
    return found


@bp.post("/models/<model:slug>/retrainings")
@documented(lambda f: {
    "operationId": "startRetraining", "tags": ["training"],
    "summary": "Train the recipe again on the server and compare its weights with the stored ones",
    "parameters": [f.retrained_slug],
    "responses": {"200": response_of(ref("RetrainingReport"), "A kept report of exactly these recipe files."),
                  "202": response_of(ref("RetrainingJob"), "Training: poll the Location.", "Location", "Retry-After"),
                  **errors(403, 404, 413, 415)}})
@spends_compute
def retrain(slug: str):
    """Train the recipe again on the server and compare its weights: 200 with a kept report, else 202 with the job."""
    found = retrained_model(slug)
    cached = retrainings.cached(found)
    if cached is not None:  # a kept report of exactly these recipe files starts nothing, so it spends no budget
        return jsonify(cached)
    job, token = retrainings.start(found)
    if not job.get("recorded", True):
        report = retrainings.wait(job["id"], current_app.config["RETRAINING_TIMEOUT"] + 5)
        if report is not None:  # the shared store is down: no poll could find the job, so this request waited
            return jsonify(report)
        raise ServiceUnavailable("the shared state cannot be reached, so this retraining could not be kept for "
                                 "polling and did not finish in time; try again shortly", retry_after=5)
    return _job_answer(retrainings.public(job) | ({"cancel_token": token} if token else {}), 202)


@bp.get("/models/<model:slug>/retrainings/<job_id>")
@documented(lambda f: {
    "operationId": "getRetrainingJob", "tags": ["training"], "summary": "A retraining job",
    "parameters": [f.retrained_slug, f.job_id],
    "responses": found(ref("RetrainingJob"), "The job: its curves so far, and once done its report (until then with "
                                             "Retry-After).", "Retry-After")})
def retraining_job(slug: str, job_id: str):
    """A retraining job: its curves so far while it trains, then its report."""
    return polled(retrainings.public(_retraining(slug, job_id)))


@bp.delete("/models/<model:slug>/retrainings/<job_id>")
@documented(lambda f: {
    "operationId": "cancelRetraining", "tags": ["training"], "summary": "Cancel a retraining",
    "parameters": [f.retrained_slug, f.job_id],
    "responses": {"202": response_of(ref("RetrainingJob"), "Stopping: poll the Location for its end.", "Location",
                                     "Retry-After"), **errors(403, 404, 409)}})
@spends_compute
def cancel_retraining(slug: str, job_id: str):
    """Cancel a retraining: 202 while it stops (poll the Location), 409 once it has ended."""
    return cancelled(retrainings, _retraining(slug, job_id))


def cancelled(jobs: Jobs, job: dict) -> Response:
    """A job its starter asked to stop with the token in Authorization: 202 while it stops, 409 once it ended."""
    if job["state"] == "done":
        abort(409, f"{jobs.kind} job {job['id']!r} has ended already ({job['report']['status']}); nothing to cancel")
    bearer = request.headers.get("Authorization", "")
    jobs.cancel(job, bearer[7:].strip() if bearer[:7].lower() == "bearer " else None)
    return _job_answer(jobs.public(job), 202)


def _retraining(slug: str, job_id: str) -> dict:
    """The retraining job `job_id` of this model, by its record (a model suspended meanwhile still has its jobs)."""
    job = retrainings.job(job_id)
    if job is None or job["model"] != slug:
        abort(404, f"no retraining job {job_id!r} for model {slug!r}")
    return job


def polled(job: dict) -> Response:
    """A job as a poll answers it: with Retry-After until it is done."""
    response = jsonify(job)
    if job["state"] != "done":
        response.headers["Retry-After"] = "1"
    return response


def _job_answer(job: dict, status: int) -> Response:
    """A job answered with its Location to poll and when to ask again."""
    response = jsonify(job)
    response.status_code = status
    response.headers["Location"] = job["location"]
    response.headers["Retry-After"] = "1"
    return response


@bp.get("/models/<model:slug>/verifications/history")
@documented(lambda f: {
    "operationId": "getVerificationHistory", "tags": ["verification"],
    "summary": "Where the model was verified and retrained, and the drift between environments",
    "parameters": [f.slug], "responses": found(ref("History"), "The history (newest entries first).")})
def verification_history(slug: str):
    """Where this model was verified and retrained: each environment, its largest deviation, the drift between."""
    return jsonify(history.answer(get_model(slug)))


@bp.post("/models/<model:slug>/verifications/history")
@documented(lambda f: {
    "operationId": "shareVerification", "tags": ["verification"],
    "summary": "Keep a report a reader's verifier made, as a client's", "parameters": [f.slug],
    "x-checked-beyond-schema": ["values_failed"],  # at most `values`: a 400 that says so
    "requestBody": json_body(ref("SharedEntry")),
    "responses": {"201": response_of(ref("HistoryEntry"), "The entry as kept."),
                  **errors(400, 403, 404, 413, 415)}})
@spends_compute
def share_verification(slug: str):
    """A report a reader's verifier made, kept in the history as a client's (never as the server's): 201."""
    found = get_model(slug)
    budget.spend()  # a write any client can make: counted like a run
    response = jsonify(history.shared(found, _json_body()))
    response.status_code = 201
    return response


@bp.get("/models/<model:slug>/verifications/<job_id>")
@documented(lambda f: {
    "operationId": "getVerificationJob", "tags": ["verification"], "summary": "A verification job",
    "parameters": [f.slug, f.job_id],
    "responses": found(ref("Job"), "The job and, once done, its report (until then with Retry-After).",
                       "Retry-After")})
def verification_job(slug: str, job_id: str):
    """A verification job: its state and elapsed time, and the report once it is done. Its record names its model:
    a job whose model was suspended meanwhile (it hung) still answers, with the report that says so."""
    job = verifications.job(job_id)
    if job is None or job["model"] != slug:
        abort(404, f"no verification job {job_id!r} for model {slug!r}")
    return polled(verifications.public(job))


def _json_body():
    """The request's JSON, read once by limit_body: 415 unless it is declared JSON (another site's page can send
    text/plain or a form without asking, JSON only with the CORS preflight this API never grants), 400 when
    it does not parse or nests too deeply to parse."""
    if request.mimetype != "application/json":
        raise UnsupportedMediaType(f"body: send JSON with Content-Type: application/json, not "
                                   f"{request.mimetype or 'no Content-Type'}")
    raw = request.environ.get("tensorviz.body")
    if raw is None:
        raw = request.get_data(cache=True)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        abort(400, "body: send a JSON object (Content-Type: application/json)")


def _record_check(model: Model, case_id, result: dict) -> dict:
    """A live case compared with the recorded one it should reproduce, by the verification's own rule."""
    recorded = model.case(case_id)
    if recorded is None:
        cases = ", ".join(c["id"] for c in model.manifest["experiment"]["cases"])
        abort(400, f"compare_with: {str(case_id)[:40]!r} is not a recorded case; the cases are {cases}")
    tol = tolerance_for(model.manifest)
    return compare_case(recorded, result, tol) | {"tolerance": tol.as_dict()}


class ActionConverter(BaseConverter):
    """A lab endpoint's name: any plain name but those of the fixed routes beside it."""

    regex = rf"(?!(?:{'|'.join(TAKEN)})$)[a-z][a-z_]{{0,39}}"


@bp.post("/models/<model:slug>/interventions")
@documented(lambda f: {
    "operationId": "intervene", "tags": ["interventions"],
    "summary": "A recorded case or a lab request run as it is and with modules or heads zeroed, averaged, scaled or "
               "patched", "parameters": [f.slug],
    "requestBody": json_body(f.intervened),
    "responses": {"200": response_of(ref("Intervened"), "Before, after, their difference and each module's movement."),
                  **errors(*POST_ERRORS)}})
@spends_compute
def interventions_of(slug: str):
    """A recorded case or a lab request run as it is and with modules (or attention heads) zeroed, averaged,
    scaled or patched: every item before, after and their difference, and how much each module moved."""
    return jsonify(interventions.answer(get_model(slug), _json_body()))


@bp.post("/models/<model:slug>/interventions/options")
@documented(lambda f: {
    "operationId": "interventionOptions", "tags": ["interventions"],
    "summary": "What an intervention can change on a recorded case or a lab request, node by node",
    "parameters": [f.slug],
    "requestBody": json_body(f.subject),
    "responses": {"200": response_of(ref("InterventionOptions"), "Each module node's actions and the cases a patch "
                                                                "may take it from, and why not the rest."),
                  **errors(*POST_ERRORS)}})
@spends_compute
def intervention_options(slug: str):
    """What What if? can change on a recorded case or a lab request, node by node, and why not the rest."""
    return jsonify(interventions.options(get_model(slug), _json_body()))


@bp.post("/models/<model:slug>/activations")
@documented(lambda f: {
    "operationId": "activations", "tags": ["lab"],
    "summary": "What every node of the graph computes on a recorded case or a lab request, each output drawn small "
               "(or one node's large)", "parameters": [f.slug],
    "requestBody": json_body(f.activations),
    "responses": {"200": response_of(ref("Activations"), "Each node's output shape, its input's, and a bounded "
                                                        "drawing of its output."), **errors(*POST_ERRORS)}})
@spends_compute
def activations_of(slug: str):
    """What every node computes on a recorded case or a lab request: its output's shape and a bounded drawing."""
    return jsonify(activations.answer(get_model(slug), _json_body()))


@bp.post("/models/<model:slug>/training")
@documented(lambda f: {
    "operationId": "trainingStages", "tags": ["training"],
    "summary": "A recorded case or a lab request run on every stage of weights kept while the model trained",
    "parameters": [f.trained_slug],
    "requestBody": json_body(f.stages),
    "responses": {"200": response_of(ref("Stages"), "Each stage's answer and each module's movement from "
                                                    "initialisation."), **errors(*POST_ERRORS)}})
@spends_compute
def training_of(slug: str):
    """A recorded case or a lab request run on every stage of weights the recipe kept while it trained:
    each stage's answer, and how far every module's weights and output had moved from initialisation."""
    found = get_model(slug)
    if found.training is None:
        abort(404, f"model {slug!r} keeps no weights from its training")
    return jsonify(training_stages.answer(found, _json_body()))


@bp.route("/models/<model:slug>/<action:action>", methods=["GET", "POST", "OPTIONS"], provide_automatic_options=False)
@spends_compute
def lab_endpoint(slug: str, action: str):
    """A live-lab endpoint the model's recipe declares: what-if runs, samplers, generation, traces."""
    found = get_model(slug)
    declared = live.live_lab(found).endpoints.get(action)
    if declared is None:
        abort(404, f"model {slug!r} has no lab endpoint {action!r}; it has {', '.join(found.lab.endpoints)}")
    allowed = [declared.method, "HEAD"] if declared.method == "GET" else [declared.method]
    if request.method == "OPTIONS":  # the methods this endpoint answers, not every method of the route
        return Response(status=200, headers={"Allow": ", ".join([*allowed, "OPTIONS"])})
    if request.method not in allowed:
        raise MethodNotAllowed(allowed, f"{action} answers {' and '.join(allowed)} only")
    body = _json_body() if declared.method == "POST" else parse_query(request.args.to_dict(flat=False), declared.fields)
    intervened = declared.method == "POST" and isinstance(body, dict) and "interventions" in body
    steps = body.pop("interventions") if intervened else None
    compare_with = None
    if declared.answers == "case" and isinstance(body, dict) and "compare_with" in body:
        compare_with = body.pop("compare_with")
        if not isinstance(compare_with, str):
            abort(400, "compare_with: must be the id of a recorded case")
    args = found.lab.kind.prepare(action, validate(body, declared.fields), found.lab)
    if not intervened:
        answer = live.lab_answer(found, declared.entry, args)
    else:  # the same run with the interventions: the answer is the intervened one
        answer = interventions.lab_answer(found, declared, args, steps)
    # A plain run's result is the recipe process's JSON text, answered as it is; an intervened one is data.
    raw, keys = answer.pop("result_json", None), answer.pop("keys", None)
    result = answer.pop("result", None)
    envelope = {"kind": action, **answer}
    if declared.answers != "case":
        if action in found.lab.kind.says_outcome:  # read once, not encoded again: the answer is still spliced below
            result = orjson.loads(raw) if result is None else result
            said = found.lab.kind.result_outcome(action, args, result, found.lab)
            envelope |= {"outcome": said} if said else {}
        if raw is not None and keys is not None and not set(keys) & set(envelope):
            return _spliced(envelope, raw)
        return jsonify(envelope | (json.loads(raw) if result is None else result))
    case = json.loads(raw) if result is None else result  # the axes and the record check read it
    envelope["axes"] = found.axes({"id": "live", **case})
    envelope["groups"] = found.groups(case)
    if (said := found.outcome(case)) is not None:
        envelope["outcome"] = said
    if compare_with is not None:
        envelope["record_check"] = _record_check(found, compare_with, case)
    if raw is not None and "id" not in (keys or ()):
        return _spliced(envelope, raw, under="case", first='"id":"live"')
    return jsonify(envelope | {"case": {"id": "live", **case}})


def _spliced(envelope: dict, raw: str, under: str | None = None, first: str = "") -> Response:
    """The envelope's JSON with an object's JSON text in it, not parsed nor encoded again: its members beside
    the envelope's, or under the key `under` after the member `first` (JSON text). The keys were checked
    not to collide."""
    head = json.dumps(envelope, separators=(",", ":"), allow_nan=False)[:-1]
    members = raw[1:-1].strip()
    if under is None:
        body = f"{head},{members}}}" if members else f"{head}}}"
    else:
        inner = ",".join(part for part in (first, members) if part)
        body = f'{head},{json.dumps(under)}:{{{inner}}}}}'
    return current_app.response_class(body, mimetype="application/json")


@bp.get("/openapi.json")
@documented(lambda f: {"operationId": "getOpenapi", "tags": ["catalog"], "summary": "This document",
                        "responses": found({"type": "object"}, "OpenAPI 3.1")})
def openapi():
    """The OpenAPI 3 description of this API."""
    return jsonify(openapi_document())
