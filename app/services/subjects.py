"""What a run beyond the plain lab is asked on, in a JSON body such as

    {"case": "mask-a"} or {"request": {...}}, optional "endpoint"

A recorded case runs as the preset request its lab kind makes of it, where the model has a lab and the kind can;
any other recorded case (every case of a model without a lab) runs as run.py's replay() of that case alone. A
request runs on one of the lab's endpoints. Shared by interventions and the training stages.
"""

from dataclasses import dataclass

from pydantic import ValidationError

from ..domain.catalog import Model
from ..domain.labs import Endpoint
from ..domain.labs.fields import FieldError, refuse_shape, validate
from ..domain.shapes import validator

# The entry a recorded case is replayed by where no lab endpoint runs it: run.py's replay(case=...), which answers
# every case or the one named (its dot keeps it apart from any lab.py function's name).
REPLAY = "run.replay"


@dataclass(frozen=True)
class Subject:
    """A run's entry and arguments: a lab endpoint's (`endpoint`) or a recorded case replayed (`endpoint` None);
    and the runs a patch may take its outputs from, by recorded case (`sources`)."""

    entry: str
    args: dict
    endpoint: Endpoint | None
    sources: dict[str, dict]

    @property
    def answers_case(self) -> bool:
        """Whether the run answers a case (its items keyed like the recording's) rather than a lab's result."""
        return self.endpoint is None or self.endpoint.answers == "case"

    @property
    def name(self) -> str | None:
        """The lab endpoint's name, as the answer states it; None for a replayed case."""
        return None if self.endpoint is None else self.endpoint.name


def checked(body, shape: type) -> None:
    """A JSON object of the body's type (shapes.SubjectRequest, InterventionRequest), else FieldError naming the
    first field at fault. What its fields hold is checked against the model after (subject(); the interventions by
    domain/interventions.plan, after what they run on), where a message can name what they may be."""
    try:
        validator(shape).validate_python(body)
    except ValidationError as exc:
        refuse_shape(exc.errors(), shape.__annotations__)


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
    """Every recorded case the kind can turn into a request of this endpoint (of the endpoint its preset names,
    where it names one), checked and with defaults."""
    found = {}
    for preset in model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab):
        if preset.get("endpoint", endpoint.name) != endpoint.name:
            continue
        request = {k: v for k, v in preset["request"].items() if k in endpoint.fields}
        try:
            found[preset["id"]] = model.lab.kind.prepare(endpoint.name, validate(request, endpoint.fields), model.lab)
        except FieldError:
            continue  # a case this endpoint cannot take (another kind of request): not a source
    return found


def replayed(model: Model) -> dict[str, dict]:
    """Every recorded case as the arguments that replay it alone."""
    return {case["id"]: {"case": case["id"]} for case in model.manifest["experiment"]["cases"]}


def subject(model: Model, body: dict) -> Subject:
    """The run a body asks for: a recorded case (`case`) or a request of a lab endpoint (`request`), checked;
    FieldError (a 400) names the field at fault."""
    if ("case" in body) == ("request" in body):
        raise FieldError("case: send either a recorded case or a request, not both and not neither")
    cases = replayed(model)
    if model.lab is None:
        if "request" in body or "endpoint" in body:
            field = "request" if "request" in body else "endpoint"
            raise FieldError(f"{field}: model {model.slug!r} has no lab; send one of its recorded cases instead")
        return _replay(body, cases)
    endpoint = endpoint_for(model, body)
    presets = preset_requests(model, endpoint)
    if "case" in body:
        if isinstance(body["case"], str) and body["case"] in presets:
            return Subject(endpoint.entry, presets[body["case"]], endpoint, presets)
        if "endpoint" in body:
            raise FieldError(f"case: must be one of the recorded cases {', '.join(presets) or '(none)'}, which "
                             f"{endpoint.name} can run")
        return _replay(body, cases)  # a case the lab cannot make a request of: replayed by its recipe
    if not isinstance(body["request"], dict):
        raise FieldError("request: must be an object, a request of the lab endpoint")
    try:
        args = model.lab.kind.prepare(endpoint.name, validate(body["request"], endpoint.fields), model.lab)
    except FieldError as exc:
        raise FieldError(f"request.{exc}") from None
    return Subject(endpoint.entry, args, endpoint, presets)


def _replay(body: dict, cases: dict[str, dict]) -> Subject:
    if not isinstance(body["case"], str) or body["case"] not in cases:
        raise FieldError(f"case: must be one of the recorded cases {', '.join(cases) or '(this recording holds none)'}")
    return Subject(REPLAY, cases[body["case"]], None, cases)
