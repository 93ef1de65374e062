"""The OpenAPI 3.1 description of the JSON API, served at /api/openapi.json.

Every answer's schema is generated from the TypedDict that the code building it is annotated with
(domain/shapes.py, and each lab kind's shapes.py for its results), strict: an answer holds no property its
schema does not name. Each model's lab endpoints are described from its recipe's declaration (the same one
that validates the requests), and the slug parameter lists the models this server has, so the document
describes this server exactly. tests/test_openapi.py runs schemathesis over every operation against it and
drives a client generated from it.
"""

import re
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass

from apispec import APISpec
from flask import current_app

from ..domain import shapes
from ..domain.catalog import Catalog, Model
from ..domain.labs import KINDS, Endpoint
from ..services.extensions import models
from ..services.retraining import trained_here

ERRORS = {
    400: "Bad input; the message starts with the field or parameter at fault.",
    403: "Asked by another site's page (Sec-Fetch-Site): nothing that runs a recipe is started cross-site; or a "
         "retraining's cancel without the token its start answered to the client that started it.",
    404: "No such model, job or route.",
    409: "The job has ended already: there is nothing left to cancel.",
    412: "If-Match names no current representation (the message gives the ETag).",
    413: "Request body too large.",
    415: "A body that is not declared JSON (Content-Type: application/json).",
    429: "Busy: the client's compute budget is spent, or every recipe worker and the queue are busy (Retry-After says "
         "when to ask again).",
    503: "Unavailable: the shared state or the compute queue cannot be reached, a recipe worker died before answering, "
         "or the model is suspended (each with Retry-After); or the recipe failed on this input (the message says "
         "where and why, in words), or the model's checkpoint is not on this server (the message says how to provide "
         "one).",
    504: "Too slow: the recipe ran past its timeout and was stopped, or a proxy in front of the server gave up waiting "
         "(Retry-After, where given, says when to ask again).",
}
# What any operation may answer when the server is busy or a part of it is out of reach, whatever it serves: a
# stored manifest's GET behind a proxy too; each may say when to try again (Retry-After). Added to every operation in
# one place (build_spec), never listed per route.
BUSY = (429, 503, 504)
GET_ERRORS = (404, 412)
POST_ERRORS = (400, 403, 404, 413, 415)  # and BUSY, as every operation
HEADERS = {
    "ETag": {"description": "The representation's entity tag, for If-None-Match (304) and If-Match (412).",
             "required": True, "schema": {"type": "string"}},
    "Location": {"description": "The job to poll.", "required": True, "schema": {"type": "string"}},
    "Retry-After": {"description": "Seconds to wait before asking again.", "schema": {"type": "integer"}},
}
# The answers named in the document; each TypedDict these name is described too, under its own name.
ANSWERS = (shapes.Catalog, shapes.Manifest, shapes.Files, shapes.Report, shapes.Job, shapes.Intervened,
           shapes.InterventionOptions, shapes.Stages, shapes.Error, shapes.LabAnswer, shapes.CaseAnswer,
           shapes.Intervention, shapes.RetrainingReport, shapes.RetrainingJob, shapes.History, shapes.SharedEntry,
           shapes.Variant, shapes.VariantJob, shapes.Variants, shapes.Activations)
# The request bodies validated against their types (shapes.py), described from the same types.
BODIES = (shapes.SubjectRequest, shapes.InterventionRequest, shapes.VariantRequest, shapes.ActivationsRequest)
TAGS = [
    {"name": "catalog", "description": "The served models, their stored manifests and files."},
    {"name": "verification", "description": "The recipe re-executed on the server and compared with its recording."},
    {"name": "lab", "description": "Each model's live lab: what-if runs, generation, traces, computed live."},
    {"name": "interventions", "description": "Runs with modules or attention heads changed."},
    {"name": "training", "description": "Runs on the weights kept while a model trained, and the training run again."},
]


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def response_of(schema: dict, description: str, *headers: str) -> dict:
    answer = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        answer["headers"] = {name: {"$ref": f"#/components/headers/{name}"} for name in headers}
    return answer


def json_body(schema: dict) -> dict:
    """A required JSON request body of this schema."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def errors(*codes: int) -> dict:
    return {str(code): {"$ref": f"#/components/responses/E{code}"} for code in codes}


def found(schema: dict, description: str, *headers: str) -> dict:
    """The answers of a GET: the representation with its ETag, 304 to a matching If-None-Match, the errors."""
    return {"200": response_of(schema, description, "ETag", *headers),
            "304": {"description": "Not modified: If-None-Match names the current representation.",
                    "headers": {"ETag": {"$ref": "#/components/headers/ETag"}}},
            **errors(*GET_ERRORS)}


def _strict(schema: dict) -> dict:
    """A generated schema without pydantic's titles, and closed: no property beyond those it names."""
    out = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key == "properties":
            value = {name: _strict(s) for name, s in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _strict(value)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            value = [_strict(s) for s in value]
        out[key] = value
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def generated_schemas(types: tuple[type, ...]) -> dict[str, dict]:
    """The JSON Schemas of these TypedDicts and of every type they name, by type name."""
    from pydantic import TypeAdapter  # here, not at import: a web process that never serves the document never loads it

    adapters = [(t.__name__, "serialization", TypeAdapter(t)) for t in types]
    _, top = TypeAdapter.json_schemas(adapters, ref_template="#/components/schemas/{model}")
    found = {name: _strict(schema) for name, schema in top.get("$defs", {}).items()}
    clashes = [name for name in found if not name.isidentifier() or "__" in name]
    assert not clashes, f"two shapes share a name (rename one): {clashes}"
    return found


def _request(model: Model, endpoint: Endpoint) -> dict:
    """The request an endpoint takes (its answer repeats it, with the defaults it ran with), described from the
    recipe's declared fields and the limits its lab kind checks across fields."""
    properties = {f: field.json_schema() for f, field in endpoint.fields.items()}
    for name, limit in model.lab.kind.limits.get(endpoint.name, {}).items():
        properties[name]["description"] = " ".join(filter(None, (properties[name].get("description"), limit)))
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": [f for f, field in endpoint.fields.items() if field.required]}


def _answer(schemas: dict[str, dict], model: Model, endpoint: Endpoint, request: dict) -> dict:
    """One lab endpoint's answer: the live envelope with its own request and kind, and its result's members
    (a case under `case`)."""
    answer = deepcopy(schemas["CaseAnswer" if endpoint.answers == "case" else "LabAnswer"])
    answer["properties"] |= {"kind": {"type": "string", "const": endpoint.name}, "request": request}
    result = model.lab.kind.results.get(endpoint.name)
    if result is not None:
        answer["properties"] |= deepcopy(schemas[result.__name__]["properties"])
        answer["required"] = answer["required"] + schemas[result.__name__].get("required", [])
    elif endpoint.answers != "case":  # a result whose shape the lab kind does not declare
        answer["additionalProperties"] = True
    return answer


def _slug(slugs: list[str]) -> dict:
    return {"name": "slug", "in": "path", "required": True, "schema": {"type": "string", "enum": slugs or ["none"]}}


@dataclass(frozen=True)
class Fixed:
    """What the fixed routes' operations are described with, from the catalog: the path parameters (a slug of any
    served model, of a model that keeps its training, of one whose recipe trains it; a job's id) and the bodies that
    name a recorded case or a lab request."""

    slug: dict
    trained_slug: dict
    retrained_slug: dict
    job_id: dict
    intervened: dict
    subject: dict
    stages: dict
    variant: dict
    activations: dict

    @classmethod
    def build(cls, bodies: dict[str, dict], slugs: list[str], trained: dict[str, list[str]],
           retrained: list[str]) -> "Fixed":
        """`bodies` are the request bodies' generated schemas (BODIES), `trained` the recorded cases of each model
        that keeps its training, `retrained` the models whose recipe trains them. The bodies are given inline, each
        under its operation, as they were written before they were generated."""
        stages = deepcopy(bodies["SubjectRequest"])
        stages["properties"]["case"]["enum"] = sorted({c for cases in trained.values() for c in cases}) or [""]
        return cls(slug=_slug(slugs), trained_slug=_slug(list(trained)), retrained_slug=_slug(retrained),
                   job_id={"name": "job_id", "in": "path", "required": True,
                           "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
                   intervened=bodies["InterventionRequest"], subject=bodies["SubjectRequest"], stages=stages,
                   variant=bodies["VariantRequest"], activations=bodies["ActivationsRequest"])


def documented(describe: Callable[[Fixed], dict]) -> Callable:
    """Declare a route's OpenAPI operation on the route itself (under its @bp decorator): the document's paths are
    made from the app's routes, never listed beside them."""

    def mark(view: Callable) -> Callable:
        view.openapi = describe
        return view

    return mark


def route_paths(fixed: Fixed) -> dict:
    """Every documented route of the app as the document's paths: its rule with {braces}, an operation per method."""
    paths: dict[str, dict] = {}
    for rule in current_app.url_map.iter_rules():
        describe = getattr(current_app.view_functions[rule.endpoint], "openapi", None)
        if describe is not None:
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                paths.setdefault(path, {})[method.lower()] = describe(fixed)
    return paths


def _operation_id(model: Model, name: str) -> str:
    """gpt's generations: gptGenerations; bert-base's datalab: bertBaseDatalab."""
    words = [w for w in f"{model.slug}-{name}".replace("_", "-").split("-") if w]
    return words[0] + "".join(w.capitalize() for w in words[1:])


def _lab_paths(model: Model, schemas: dict[str, dict], intervened: dict) -> dict:
    """Each lab endpoint of one model, its fields described from the recipe's declaration; a POST's body may add
    `intervened`, the interventions' schema."""
    paths = {}
    for name, endpoint in model.lab.endpoints.items():
        operation: dict = {"operationId": _operation_id(model, name), "tags": ["lab"],
                           "summary": f"{model.slug}: {endpoint.summary}"}
        request = _request(model, endpoint)
        answer = _answer(schemas, model, endpoint, request)
        beyond = sorted(set(model.lab.kind.limits.get(name, {})) | {f for f, field in endpoint.fields.items()
                                                                     if field.beyond_schema})
        if beyond:  # a request the schema admits may still be refused with a 400 that names one of these
            operation["x-checked-beyond-schema"] = beyond
        described = "The answer, computed live by the recipe."
        if endpoint.method == "POST":
            body = deepcopy(request)
            body["properties"]["interventions"] = deepcopy(intervened) | {
                "description": "Run with these interventions: the answer is the intervened one, with each module's "
                               "movement (effects)."}
            if endpoint.answers == "case":
                body["properties"]["compare_with"] = {
                    "type": "string", "enum": [c["id"] for c in model.manifest["experiment"]["cases"]],
                    "description": "A recorded case this run should reproduce: the answer carries record_check, the "
                                   "server's comparison."}
            operation["requestBody"] = json_body(body)
            operation["responses"] = {"200": response_of(answer, described), **errors(*POST_ERRORS)}
        else:
            operation["parameters"] = [_query(f, endpoint.fields[f].required, schema)
                                       for f, schema in request["properties"].items()]
            operation["responses"] = found(answer, described) | errors(400, 403)
        paths[f"/api/models/{model.slug}/{name}"] = {endpoint.method.lower(): operation}
    return paths


def _query(name: str, required: bool, schema: dict) -> dict:
    """A field as a query parameter: a list travels comma-separated (style form, not exploded)."""
    parameter = {"name": name, "in": "query", "required": required, "description": schema.get("description", ""),
                 "schema": {k: v for k, v in schema.items() if k != "description"}}
    if schema.get("type") == "array":
        parameter |= {"style": "form", "explode": False}
    return parameter


def build_spec(catalog: Catalog) -> dict:
    """The document for the models in this catalog."""
    served = list(catalog.models.values())
    spec = APISpec(title="TensorViz API", version="1", openapi_version="3.1.0", info={
        "description": "The stored manifests, their files, server-side verification and the live lab. Every time "
                       "is RFC 3339 in UTC. A method a path does not list answers 405 with Allow; OPTIONS answers "
                       "204 with Allow."}, servers=[{"url": "/", "description": "This server"}], tags=TAGS)
    results = tuple(shape for kind in KINDS.values() for shape in kind.results.values())
    schemas = generated_schemas(ANSWERS + results + BODIES)
    bodies = {shape.__name__: schemas.pop(shape.__name__) for shape in BODIES}
    for name, schema in schemas.items():
        spec.components.schema(name, schema)
    for name, header in HEADERS.items():
        spec.components.header(name, header)
    for code, description in ERRORS.items():
        spec.components.response(f"E{code}", response_of(ref("Error"), description, *(("Retry-After",) if code in BUSY
                                                                                     else ())))
    trained = {m.slug: [c["id"] for c in m.manifest["experiment"]["cases"]] for m in served if m.training is not None}
    paths = route_paths(Fixed.build(bodies, [m.slug for m in served], trained,
                                 [m.slug for m in served if trained_here(m)]))
    for model in served:
        if model.has_lab:
            paths |= _lab_paths(model, schemas, bodies["InterventionRequest"]["properties"]["interventions"])
    for path, operations in paths.items():
        for operation in operations.values():
            operation["responses"] |= errors(*BUSY)
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def openapi_document() -> dict:
    """The document for the current catalog, rebuilt only when the catalog was."""
    catalog = models.catalog
    return catalog.derived("openapi", lambda: build_spec(catalog))
