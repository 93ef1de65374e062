"""What a run beyond the plain lab is asked on: a recorded case (run as the preset request its lab kind
makes of it) or a request of one of the model's lab endpoints, in a JSON body such as

    {"case": "mask-a"} or {"request": {...}}, optional "endpoint"

Shared by interventions and the training stages.
"""

from ..domain.catalog import Model
from ..domain.labs import Endpoint
from ..domain.labs.fields import FieldError, validate


def checked(body, fields: set[str]) -> None:
    """A JSON object with only these fields, else FieldError naming the first one at fault."""
    if not isinstance(body, dict):
        raise FieldError("body: send a JSON object (Content-Type: application/json)")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise FieldError(f"{unknown[0]}: unknown field; the fields are {', '.join(sorted(fields))}")


def endpoint_for(model: Model, body: dict) -> Endpoint:
    """The lab endpoint the request runs: the one the body names, else the first that answers a case, else the
    first."""
    endpoints = model.lab.endpoints
    if "endpoint" not in body:
        return next((e for e in endpoints.values() if e.answers == "case"), next(iter(endpoints.values())))
    name = body["endpoint"]
    if not isinstance(name, str) or name not in endpoints:
        raise FieldError(f"endpoint: must be one of {', '.join(endpoints)}")
    return endpoints[name]


def preset_requests(model: Model, endpoint: Endpoint) -> dict[str, dict]:
    """Every recorded case the kind can turn into a request of this endpoint, checked and with defaults."""
    found = {}
    for preset in model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab):
        request = {k: v for k, v in preset["request"].items() if k in endpoint.fields}
        try:
            found[preset["id"]] = model.lab.kind.prepare(endpoint.name, validate(request, endpoint.fields), model.lab)
        except FieldError:
            continue  # a case this endpoint cannot take (another kind of request): not a source
    return found


def asked_request(model: Model, endpoint: Endpoint, body: dict, presets: dict[str, dict]) -> dict:
    """The request a body asks for: a recorded case's preset (`case`) or its own (`request`), checked."""
    if ("case" in body) == ("request" in body):
        raise FieldError("case: send either a recorded case or a request, not both and not neither")
    if "case" in body:
        if not isinstance(body["case"], str) or body["case"] not in presets:
            raise FieldError(f"case: must be one of the recorded cases {', '.join(presets) or '(none)'}")
        return presets[body["case"]]
    if not isinstance(body["request"], dict):
        raise FieldError("request: must be an object, a request of the lab endpoint")
    try:
        args = validate(body["request"], endpoint.fields)
        return model.lab.kind.prepare(endpoint.name, args, model.lab)
    except FieldError as exc:
        raise FieldError(f"request.{exc}") from None
