"""The API's variant routes: a learner's training of a model with its knobs moved (build/variants.py). A variant
once made is served as a model of its own: every model route answers under /api/models/<slug>/variants/<id> too (the
`model` path converter)."""

from flask import abort, current_app, jsonify, request
from werkzeug.exceptions import ServiceUnavailable
from werkzeug.routing import BaseConverter

from ..build.variants import kept_of, variants
from ..domain.shapes import VariantRequest
from ..services.extensions import models
from ..services.subjects import checked
from .api import _job_answer, _json_body, bp, cancelled, polled, spends_compute
from .openapi import documented, errors, found, json_body, ref, response_of


class ModelPath(BaseConverter):
    """A model's slug, or a variant's path under it ("mlp/variants/<16 hex digits>")."""

    regex = r"[a-z0-9][a-z0-9-]{0,62}(?:/variants/[0-9a-f]{16})?"


class Revision(BaseConverter):
    """A recording's revision (hex digits, as the schema holds it): never the "variants" of a variant's path."""

    regex = r"[0-9a-f]{8,64}"


@bp.post("/models/<slug>/variants")
@documented(lambda f: {
    "operationId": "startVariant", "tags": ["training"],
    "summary": "Train the model with knobs of your own, then record it: a variant served as a model of its own",
    "parameters": [f.retrained_slug], "requestBody": json_body(f.variant),
    # Each model's own knobs, checked as its train.py checks them (GET .../variants lists them): a 400 naming the knob.
    "x-checked-beyond-schema": ["knobs"],
    "responses": {"200": response_of(ref("Variant"), "The kept variant of exactly these knobs."),
                  "202": response_of(ref("VariantJob"), "Training: poll the Location.", "Location", "Retry-After"),
                  **errors(400, 403, 404, 413, 415, 429, 503)}})
@spends_compute
def start_variant(slug: str):
    """The variant these knobs make: 200 with it where it is kept, else 202 with the job that trains and records it."""
    model = models.get_or_404(slug)
    body = _json_body() if request.get_data() else {}  # an empty body moves no knob, which start() refuses by name
    checked(body, VariantRequest)
    variant, job, token = variants.start(model, body)
    if variant is not None:
        return jsonify(variant.public())
    if not job.get("recorded", True):  # the shared store is down: no poll could find the job, so this request waits
        report = variants.wait(job["id"], 2 * current_app.config["VARIANT_TIMEOUT"] + 60)
        if report is not None and report["status"] == "made":
            return jsonify(report["variant"])
        raise ServiceUnavailable("the shared state cannot be reached, so this variant could not be kept; try again "
                                 "shortly", retry_after=5)
    return _job_answer(variants.public(job) | ({"cancel_token": token} if token else {}), 202)


@bp.get("/models/<slug>/variants")
@documented(lambda f: {
    "operationId": "listVariants", "tags": ["training"], "summary": "The variants of this model that are kept",
    "parameters": [f.retrained_slug], "responses": found(ref("Variants"), "The variants, the newest first.")})
def list_variants(slug: str):
    """The variants of this model kept now, the newest first, each with its knobs and links."""
    model = models.get_or_404(slug)
    return jsonify(model=model.slug, knobs={name: knob.__dict__ | {"choices": list(knob.choices)}
                                            for name, knob in model.knobs.items()},
                   variants=[v.public() for v in kept_of(model)])


@bp.get("/models/<slug>/variants/jobs/<job_id>")
@documented(lambda f: {
    "operationId": "getVariantJob", "tags": ["training"], "summary": "A variant's job",
    "parameters": [f.retrained_slug, f.job_id],
    "responses": found(ref("VariantJob"), "The job: its curves and pictures so far, then the variant (until then with "
                                          "Retry-After).", "Retry-After")})
def variant_job(slug: str, job_id: str):
    """A variant's job: the loss, the recipe's metrics and its pictures so far while it trains, then the variant."""
    return polled(variants.public(_variant_job(slug, job_id)))


@bp.delete("/models/<slug>/variants/jobs/<job_id>")
@documented(lambda f: {
    "operationId": "cancelVariant", "tags": ["training"], "summary": "Cancel a variant's training",
    "parameters": [f.retrained_slug, f.job_id],
    "responses": {"202": response_of(ref("VariantJob"), "Stopping: poll the Location for its end.", "Location",
                                     "Retry-After"), **errors(403, 404, 409)}})
@spends_compute
def cancel_variant(slug: str, job_id: str):
    """Cancel a variant's training (Authorization: Bearer <its cancel_token>): 202 while it stops, 409 once ended."""
    return cancelled(variants, _variant_job(slug, job_id))


def _variant_job(slug: str, job_id: str) -> dict:
    job = variants.job(job_id)
    if job is None or job["model"] != slug:
        abort(404, f"no variant job {job_id!r} for model {slug!r}")
    return job
