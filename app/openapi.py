"""The OpenAPI 3 description of the JSON API, assembled with apispec and served at /api/openapi.json.

The lab's limits (sequence length, vocabulary, segments) come from the served models' manifests, and
the slug parameter lists the models this server has, so the document describes this server exactly.
tests/test_openapi.py runs schemathesis over every operation against it.
"""

from apispec import APISpec
from flask import current_app

from .catalog import Catalog
from .extensions import store
from .lab import ATTENTION, MAX_SEED, limits_for

ERRORS = {
    400: "Bad input; the message starts with the field or parameter at fault.",
    404: "No such model, job or route.",
    405: "Method not allowed.",
    413: "Request body too large.",
    429: "Rate limit reached, or every recipe worker and the queue are busy (see Retry-After).",
    502: "The recipe raised an error.",
    503: "A recipe worker died before answering.",
    504: "The recipe ran past its timeout and was stopped.",
}
NUMBERS = {"type": "array", "items": {"type": "number"}}
MATRIX = {"type": "array", "items": NUMBERS}
NULLABLE_NUMBER = {"type": "number", "nullable": True}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict:
    return {str(code): {"$ref": f"#/components/responses/E{code}"} for code in codes}


def _schemas(length: int, vocab: int, segments: int) -> dict:
    ids = {"type": "array", "minItems": length, "maxItems": length,
           "items": {"type": "integer", "minimum": 0, "maximum": vocab - 1}}
    segs = {"type": "array", "minItems": length, "maxItems": length,
            "items": {"type": "integer", "minimum": 0, "maximum": segments - 1}}
    labelled = {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}}}
    live = {
        "model": {"type": "string"}, "revision": {"type": "string"}, "recorded": {"type": "boolean", "enum": [False]},
        "note": {"type": "string"}, "request": {"type": "object"}, "environment": {"type": "object"},
        "compute_seconds": {"type": "number"}, "cached": {"type": "boolean"},
    }
    return {
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["status", "name", "message"],
            "properties": {"status": {"type": "integer"}, "name": {"type": "string"}, "message": {"type": "string"}}}}},
        "Catalog": {"type": "object", "required": ["models", "unavailable"], "properties": {
            "models": {"type": "array", "items": {"type": "object", "required": [
                "slug", "title", "question", "category", "tags", "revision", "milestone", "links"]}},
            "unavailable": {"type": "array", "items": {"type": "object", "required": ["slug", "reason"]}}}},
        "Manifest": {"type": "object", "required": ["schemaVersion", "slug", "revision", "layers", "experiment"]},
        "Files": {"type": "object", "required": ["model", "revision", "files", "not_served"], "properties": {
            "files": {"type": "array", "items": {"type": "object", "required": [
                "name", "url", "content_type", "size", "sha256", "matches_recording"], "properties": {
                "size": {"type": "integer"}, "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "recorded_sha256": {"type": "string", "nullable": True}}}}}},
        "Report": {"type": "object", "required": ["model", "status"], "properties": {
            "status": {"type": "string", "enum": ["passed", "failed", "error"]},
            "message": {"type": "string"}, "cached": {"type": "boolean"}, "tolerance": {"type": "object"},
            "cases": {"type": "array"}, "checks": {"type": "array"}, "environment": {"type": "object"},
            "summary": {"type": "object"}, "duration_seconds": {"type": "number"}}},
        "Job": {"type": "object", "required": ["id", "model", "state", "elapsed_seconds", "location", "report"],
                "properties": {"state": {"type": "string", "enum": ["queued", "running", "done"]},
                               "elapsed_seconds": {"type": "number"}, "created": {"type": "number"},
                               "finished": NULLABLE_NUMBER,
                               "report": {"allOf": [_ref("Report")], "nullable": True}}},
        "RunRequest": {"type": "object", "additionalProperties": False,
                       "required": ["input_ids", "segment_ids", "mlm_positions"], "properties": {
            "input_ids": ids, "segment_ids": segs, "original_ids": ids,
            "mlm_positions": {"type": "array", "minItems": 1, "maxItems": length, "uniqueItems": True,
                              "items": {"type": "integer", "minimum": 0, "maximum": length - 1}},
            "nsp_label": {"type": "integer", "minimum": 0, "maximum": 1},
            "attention": {"type": "string", "enum": list(ATTENTION)}}},
        "LiveRun": {"type": "object", "required": ["kind", "case", "recorded", "cached"], "properties": {
            **live, "kind": {"type": "string", "enum": ["live-run"]},
            "case": {"type": "object", "required": ["id", "label", "matrices", "vectors", "metrics"], "properties": {
                "matrices": {"type": "array", "items": labelled | {"properties": {"values": MATRIX}}},
                "vectors": {"type": "array", "items": labelled | {"properties": {"values": NUMBERS}}},
                "metrics": {"type": "array", "items": labelled | {"properties": {"value": {"type": "number"}}}}}}}},
        "CorruptionRequest": {"type": "object", "additionalProperties": False, "required": ["input_ids", "seed"],
                              "properties": {"input_ids": ids, "segment_ids": segs,
                                             "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED}}},
        "Corruption": {"type": "object", "required": ["kind", "seed", "positions", "input_ids", "mlm_positions",
                                                      "run_request"], "properties": {
            **live, "kind": {"type": "string", "enum": ["corruption"]},
            "positions": {"type": "array", "items": {"type": "object", "required": [
                "position", "original", "selected", "action", "token"], "properties": {
                "action": {"type": "string", "enum": ["mask", "random", "unchanged"], "nullable": True}}}},
            "run_request": _ref("RunRequest")}},
        "Trace": {"type": "object", "required": ["kind", "position", "attention", "stages"], "properties": {
            **live, "kind": {"type": "string", "enum": ["trace"]},
            "stages": {"type": "array", "items": {"type": "object", "required": ["id", "caption"]}}}},
    }


def _paths(slugs: list[str], length: int, vocab: int, segments: int) -> dict:
    slug = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string", "enum": slugs}}
    job_id = {"name": "job_id", "in": "path", "required": True,
              "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}
    token = f"({'|'.join(str(v) for v in range(vocab - 1, -1, -1))})"
    seg = f"({'|'.join(str(v) for v in range(segments))})"
    csv = f"^{token}(,{token}){{{length - 1}}}$"
    return {
        "/api/models": {"get": {"summary": "The catalog", "responses": {
            "200": _json(_ref("Catalog"), "Served models, and manifests that could not be loaded.")}}},
        "/api/models/{slug}": {"get": {"summary": "The stored manifest, byte for byte (ETag)", "parameters": [slug],
                                       "responses": {"200": _json(_ref("Manifest"), "The manifest."), **_errors(404)}}},
        "/api/models/{slug}/files": {"get": {
            "summary": "Files with served and recorded hashes", "parameters": [slug],
            "responses": {"200": _json(_ref("Files"), "The files."), **_errors(404)}}},
        "/api/models/{slug}/verifications": {"post": {
            "summary": "Re-execute the recipe and compare with the recording", "parameters": [slug],
            "responses": {"200": _json(_ref("Report"), "The report (finished or cached)."),
                          "202": _json(_ref("Job"), "Running: poll the Location."), **_errors(404, 413, 429)}}},
        "/api/models/{slug}/verifications/latest": {"get": {
            "summary": "The latest verification report", "parameters": [slug],
            "responses": {"200": _json(_ref("Report"), "The report."), **_errors(404)}}},
        "/api/models/{slug}/verifications/{job_id}": {"get": {
            "summary": "A verification job", "parameters": [slug, job_id],
            "responses": {"200": _json(_ref("Job"), "The job and, once done, its report."), **_errors(404)}}},
        "/api/models/{slug}/runs": {"post": {
            "summary": "A what-if run of the recipe", "parameters": [slug],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("RunRequest")}}},
            "responses": {"200": _json(_ref("LiveRun"), "The run, in the shape of a recorded case."),
                          **_errors(400, 404, 413, 429, 502, 503, 504)}}},
        "/api/models/{slug}/corruptions": {"post": {
            "summary": "One seeded draw of BERT's corruption sampler", "parameters": [slug],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("CorruptionRequest")}}},
            "responses": {"200": _json(_ref("Corruption"), "The draw and the run request that scores it."),
                          **_errors(400, 404, 413, 429, 502, 503, 504)}}},
        "/api/models/{slug}/trace": {"get": {
            "summary": "One token through every stage of the model", "parameters": [
                slug,
                {"name": "input_ids", "in": "query", "required": True, "schema": {"type": "string", "pattern": csv}},
                {"name": "segment_ids", "in": "query", "schema": {
                    "type": "string", "pattern": f"^{seg}(,{seg}){{{length - 1}}}$"}},
                {"name": "position", "in": "query", "description": "Defaults to the first MASK; required without one.",
                 "schema": {"type": "integer", "minimum": 0, "maximum": length - 1}},
                {"name": "attention", "in": "query", "schema": {"type": "string", "enum": list(ATTENTION)}},
            ],
            "responses": {"200": _json(_ref("Trace"), "The trace."), **_errors(400, 404, 429, 502, 503, 504)}}},
        "/api/openapi.json": {"get": {"summary": "This document", "responses": {
            "200": {"description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }


def build_spec(catalog: Catalog) -> dict:
    """The document for the models in this catalog."""
    models = list(catalog.models.values())
    limits = limits_for(models[0].manifest) if models else None
    length, vocab, segments = (limits.length, limits.vocab, limits.segments) if limits else (1, 1, 1)
    spec = APISpec(title="TensorViz API", version="1", openapi_version="3.0.3", info={
        "description": "The stored manifests, their files, server-side verification and the live lab."})
    for name, schema in _schemas(length, vocab, segments).items():
        spec.components.schema(name, schema)
    for code, description in ERRORS.items():
        spec.components.response(f"E{code}", _json(_ref("Error"), description))
    for path, operations in _paths([m.slug for m in models] or ["none"], length, vocab, segments).items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def openapi_document() -> dict:
    """The document for the current catalog, rebuilt only when the catalog was."""
    catalog = store.catalog
    built = current_app.extensions.get("tensorviz.openapi")
    if built is None or built[0] is not catalog:
        built = (catalog, build_spec(catalog))
        current_app.extensions["tensorviz.openapi"] = built
    return built[1]
