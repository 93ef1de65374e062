"""The OpenAPI 3 description of the JSON API, assembled with apispec and served at /api/openapi.json.

Each model's lab endpoints are described from its recipe's declaration (the same one that validates the
requests), and the slug parameter lists the models this server has, so the document describes this
server exactly.
tests/test_openapi.py runs schemathesis over every operation against it.
"""

from apispec import APISpec

from ..domain.catalog import Catalog, Model
from ..services.extensions import models

ERRORS = {
    400: "Bad input; the message starts with the field or parameter at fault.",
    404: "No such model, job or route.",
    405: "Method not allowed.",
    413: "Request body too large.",
    415: "A body that is not declared JSON (Content-Type: application/json).",
    429: "Rate limit reached, or every recipe worker and the queue are busy (see Retry-After).",
    502: "The recipe raised an error.",
    503: "A recipe worker died before answering, the compute queue cannot be reached (both with Retry-After), "
         "or the model's checkpoint is not on this server (the message says how to provide one).",
    504: "The recipe ran past its timeout and was stopped.",
}
NUMBERS = {"type": "array", "items": {"type": "number"}}
MATRIX = {"type": "array", "items": NUMBERS}
NULLABLE_NUMBER = {"type": "number", "nullable": True}
_TOKENS = {"type": "array", "items": {"type": "object", "required": ["id", "name"], "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}}}}
AXES = {"type": "object", "required": ["rows", "columns"], "properties": {"rows": _TOKENS, "columns": _TOKENS}}


INTERVENTION = {"type": "object", "required": ["node", "action"], "additionalProperties": False, "properties": {
    "node": {"type": "string", "description": "A module node of the recorded graph (not an op)."},
    "action": {"type": "string", "enum": ["zero", "mean", "scale", "patch"]},
    "head": {"type": "integer", "minimum": 0, "description": "One head of an attention module the recipe declares."},
    "factor": {"type": "number", "description": "For scale."},
    "from_case": {"type": "string", "description": "For patch: the recorded case whose output replaces this one's."}}}
MOVED = {"type": "object", "additionalProperties": {"type": "number"}}
EFFECTS = {"type": "object", "additionalProperties": {"type": "number"},
           "description": "By module node: how much its output moved, |after - before| / |before|."}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict:
    return {str(code): {"$ref": f"#/components/responses/E{code}"} for code in codes}


def _schemas() -> dict:
    item = {"type": "object", "required": ["key", "label"], "properties": {
        "key": {"type": "string"}, "label": {"type": "string"}}}
    live = {
        "model": {"type": "string"}, "revision": {"type": "string"}, "recorded": {"type": "boolean", "enum": [False]},
        "note": {"type": "string"}, "request": {"type": "object"}, "environment": {"type": "object"},
        "compute_seconds": {"type": "number"}, "cached": {"type": "boolean"}, "kind": {"type": "string"},
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
        "LiveCase": {"type": "object", "required": ["kind", "case", "recorded", "cached"], "properties": {
            **live, "record_check": {"type": "object"},
            "axes": {"type": "object", "description": "By matrix key, what its rows and columns are (tokens "
                     "with their ids and names), where the lab knows; other matrices have numbered axes.",
                     "additionalProperties": AXES},
            "case": {"type": "object", "required": ["id", "matrices", "vectors", "metrics"], "properties": {
                "matrices": {"type": "array", "items": item | {"properties": {"values": MATRIX}}},
                "vectors": {"type": "array", "items": item | {"properties": {"values": NUMBERS}}},
                "metrics": {"type": "array", "items": item | {"properties": {"value": {"type": "number"}}}}}}}},
        "LiveResult": {"type": "object", "required": ["kind", "recorded", "cached"], "properties": live},
        "Intervention": INTERVENTION,
        "Intervened": {"type": "object", "required": ["model", "endpoint", "request", "interventions", "effects",
                                                      "cached"], "properties": {
            **{k: v for k, v in live.items() if k != "kind"}, "endpoint": {"type": "string"},
            "case": {"type": "string", "nullable": True},
            "interventions": {"type": "array", "items": _ref("Intervention")},
            "items": {"type": "object", "description": "For an endpoint that answers a case: every item by key, "
                      "with its kind, label, value before and after the interventions, and delta (after - before).",
                      "additionalProperties": {"type": "object", "required": ["kind", "label", "before", "after"]}},
            "before": {"type": "object"}, "after": {"type": "object"},
            "delta": {"type": "object", "description": "after - before, number by number, for another endpoint."},
            "effects": EFFECTS}},
        "Stages": {"type": "object", "required": ["model", "endpoint", "request", "stages", "cached"], "properties": {
            **{k: v for k, v in live.items() if k != "kind"}, "endpoint": {"type": "string"},
            "case": {"type": "string", "nullable": True},
            "items": {"type": "object", "description": "For an endpoint that answers a case: every item's kind and "
                      "label, by key.", "additionalProperties": {"type": "object", "required": ["kind", "label"]}},
            "stages": {"type": "array", "description": "The weights kept while the model trained, first the "
                       "initialisation, last the trained (recorded) weights.", "items": {
                "type": "object", "required": ["id", "label", "weights", "activations"], "properties": {
                    "id": {"type": "string"}, "label": {"type": "string"},
                    "values": {"type": "object", "description": "For a case endpoint: every item's value, by key."},
                    "result": {"type": "object", "description": "For another endpoint: its answer."},
                    "weights": MOVED | {"description": "By module holding parameters: ||w - w0|| / ||w0||, from "
                                                       "initialisation (its children's parameters included)."},
                    "activations": MOVED | {"description": "By module node: how far its output on this input had "
                                                           "moved from initialisation, ||a - a0|| / ||a0||."}}}}}},
    }


def _slug(slugs: list[str]) -> dict:
    return {"name": "slug", "in": "path", "required": True, "schema": {"type": "string", "enum": slugs or ["none"]}}


def _paths(slugs: list[str], trained: dict[str, list[str]]) -> dict:
    """The fixed routes; `trained` holds the recorded cases of each model that keeps its training."""
    slug = _slug(slugs)
    job_id = {"name": "job_id", "in": "path", "required": True,
              "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}
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
                          "202": _json(_ref("Job"), "Running: poll the Location."), **_errors(404, 413, 429, 503)}}},
        "/api/models/{slug}/verifications/latest": {"get": {
            "summary": "The latest verification report", "parameters": [slug],
            "responses": {"200": _json(_ref("Report"), "The report."), **_errors(404, 503)}}},
        "/api/models/{slug}/verifications/{job_id}": {"get": {
            "summary": "A verification job", "parameters": [slug, job_id],
            "responses": {"200": _json(_ref("Job"), "The job and, once done, its report."), **_errors(404)}}},
        "/api/models/{slug}/interventions": {"post": {
            "summary": "A recorded case or a lab request run as it is and with modules or heads zeroed, averaged, "
                       "scaled or patched", "parameters": [slug],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False, "required": ["interventions"], "properties": {
                    "case": {"type": "string", "description": "A recorded case (or send request)."},
                    "request": {"type": "object", "description": "A request of the lab endpoint (or send case)."},
                    "endpoint": {"type": "string", "description": "The lab endpoint to run; by default the one "
                                 "that answers a case."},
                    "interventions": {"type": "array", "minItems": 1, "maxItems": 16,
                                      "items": _ref("Intervention")}}}}}},
            "responses": {"200": _json(_ref("Intervened"), "Before, after, their difference and each module's "
                                                           "movement."),
                          **_errors(400, 404, 413, 415, 429, 502, 503, 504)}}},
        "/api/models/{slug}/training": {"post": {
            "summary": "A recorded case or a lab request run on every stage of weights kept while the model trained",
            "parameters": [_slug(list(trained))],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "additionalProperties": False,
                "oneOf": [{"required": ["case"]}, {"required": ["request"]}], "properties": {
                    "case": {"type": "string", "enum": sorted({c for cases in trained.values() for c in cases}) or [""],
                             "description": "A recorded case of the model (or send request)."},
                    "request": {"type": "object", "description": "A request of the lab endpoint (or send case)."},
                    "endpoint": {"type": "string", "description": "The lab endpoint to run; by default the one "
                                 "that answers a case."}}}}}},
            "responses": {"200": _json(_ref("Stages"), "Each stage's answer and each module's movement from "
                                                       "initialisation."),
                          **_errors(400, 404, 413, 415, 429, 502, 503, 504)}}},
        "/api/openapi.json": {"get": {"summary": "This document", "responses": {
            "200": {"description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }


def _lab_paths(model: Model) -> dict:
    """Each lab endpoint of one model, its fields described from the recipe's declaration."""
    paths = {}
    for name, endpoint in model.lab.endpoints.items():
        operation: dict = {"summary": f"{model.slug}: {endpoint.summary}",
                           "responses": {"200": _json(_ref("LiveCase" if endpoint.answers == "case" else "LiveResult"),
                                                      "The answer, computed live by the recipe."),
                                         **_errors(400, 404, 413, 415, 429, 502, 503, 504)}}
        fields = {f: field.json_schema() for f, field in endpoint.fields.items()}
        if endpoint.method == "POST":
            properties = dict(fields)
            properties["interventions"] = {"type": "array", "minItems": 1, "maxItems": 16,
                                           "items": _ref("Intervention"),
                                           "description": "Run with these interventions: the answer is the "
                                                          "intervened one, with each module's movement (effects)."}
            if endpoint.answers == "case":
                cases = [c["id"] for c in model.manifest["experiment"]["cases"]]
                properties["compare_with"] = {"type": "string", "enum": cases,
                                              "description": "A recorded case this run should reproduce: the answer "
                                                             "carries record_check, the server's comparison."}
            body = {"type": "object", "additionalProperties": False, "properties": properties,
                    "required": [f for f, field in endpoint.fields.items() if field.required]}
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        else:
            operation["parameters"] = [{"name": f, "in": "query", "required": endpoint.fields[f].required,
                                        "schema": _query_schema(schema), "description": schema.get("description", "")}
                                       for f, schema in fields.items()]
        paths[f"/api/models/{model.slug}/{name}"] = {endpoint.method.lower(): operation}
    return paths


def _query_schema(schema: dict) -> dict:
    """A list field travels in the query string as comma-separated integers."""
    if schema.get("type") != "array":
        return {k: v for k, v in schema.items() if k != "description"}
    low, high = schema["items"].get("minimum", 0), schema["items"].get("maximum", 0)
    number = f"({'|'.join(str(v) for v in range(int(high), int(low) - 1, -1))})" if high - low < 64 else "[0-9]+"
    count = schema.get("minItems", 1), schema.get("maxItems", schema.get("minItems", 1))
    return {"type": "string", "pattern": f"^{number}(,{number}){{{max(count[0] - 1, 0)},{max(count[1] - 1, 0)}}}$"}


def build_spec(catalog: Catalog) -> dict:
    """The document for the models in this catalog."""
    models = list(catalog.models.values())
    spec = APISpec(title="TensorViz API", version="1", openapi_version="3.0.3", info={
        "description": "The stored manifests, their files, server-side verification and the live lab."})
    for name, schema in _schemas().items():
        spec.components.schema(name, schema)
    for code, description in ERRORS.items():
        spec.components.response(f"E{code}", _json(_ref("Error"), description))
    trained = {m.slug: [c["id"] for c in m.manifest["experiment"]["cases"]] for m in models if m.training is not None}
    paths = _paths([m.slug for m in models], trained)
    for model in models:
        if model.has_lab:
            paths |= _lab_paths(model)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def openapi_document() -> dict:
    """The document for the current catalog, rebuilt only when the catalog was."""
    catalog = models.catalog
    return catalog.derived("openapi", lambda: build_spec(catalog))
