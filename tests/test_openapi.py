"""The API contract: the OpenAPI document covers every route, and every operation honours it."""

import re
import tempfile
import time
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate

from app.services.config import Config, TestConfig

from .bert_checkpoints import make_checkpoint
from .conftest import CATALOG_SLUGS, Apps, lab_subject
from .gpt2_checkpoints import make_checkpoint as make_gpt2_checkpoint

# Schemathesis starts verifications of every model that run on in the background; the answers checked after
# it wait for a recipe worker rather than being refused as a busy server's 429.
# Retrainings are refused there as over any budget (a documented 429): each would train a model for seconds to
# minutes; test_a_retraining_from_202_to_its_report holds their answers to the document.
APPS = Apps()  # schemathesis reads the app as the module is imported, before any fixture runs
app = APPS(type("Contract", (TestConfig,), {"RECIPE_QUEUE": 64, "RETRAINING_COST": 10**6}))
# The checkpoint model answers with the packaged checkpoint its cases were recorded from (the test set-up unpacks
# it), so that its DataLab runs; without one its operations answer the documented 503.
app.config["CHECKPOINTS_DIR"] = Config.CHECKPOINTS_DIR
# gpt2's recording was made without a checkpoint: a small random one answers its DataLab.
app.config["GPT2_CHECKPOINT"] = str(make_gpt2_checkpoint(Path(tempfile.mkdtemp(prefix="tensorviz-openapi-"))))
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)


def test_the_document_is_valid_openapi_3(client):
    document = client.get("/api/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    validate(document)


def test_every_api_route_is_described(client):
    document = client.get("/api/openapi.json").get_json()
    routed: dict[str, set[str]] = {}
    for rule in client.application.url_map.iter_rules():
        if rule.endpoint == "api.lab_endpoint":
            # One route serves every model's declared lab endpoints; each is described under its own path.
            with client.application.app_context():
                from app.services.extensions import models

                for model in models.catalog.models.values():
                    for name, endpoint in (model.lab.endpoints.items() if model.has_lab else []):
                        assert set(document["paths"][f"/api/models/{model.slug}/{name}"]) == {endpoint.method.lower()}
        elif rule.rule.startswith("/api/"):  # a path's methods may be routes of their own (GET and DELETE a job)
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            routed.setdefault(path, set()).update(m.lower() for m in rule.methods - {"HEAD", "OPTIONS"})
    for path, methods in routed.items():
        assert path in document["paths"], path
        assert methods == set(document["paths"][path]), path


def test_every_operation_documents_what_it_answers_when_busy(client):
    """A busy server (a spent budget, full workers, a store or queue out of reach, a run or a proxy out of time)
    answers statuses any operation may meet: each is documented on every operation, those that say when to ask
    again with their Retry-After header."""
    document = client.get("/api/openapi.json").get_json()
    components = document["components"]["responses"]
    walked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status in ("429", "503", "504"):
                assert status in operation["responses"], f"{method.upper()} {path} does not document {status}"
                answer = operation["responses"][status]
                answer = components[answer["$ref"].rsplit("/", 1)[-1]] if "$ref" in answer else answer
                assert "Retry-After" in answer.get("headers", {}), f"{method.upper()} {path}: {status} lacks it"
            walked += 1
    assert walked > 40  # every model's lab operations too (46 in all), not the fixed routes alone


def test_each_fixed_route_declares_its_own_operation(client):
    """The document's fixed paths are made from the routes (openapi.documented on each view), not listed beside them:
    every /api view but the lab's one route carries its operation, and openapi.py names no path of them."""
    from app.services.config import PROJECT_ROOT

    views = client.application.view_functions
    rules = [rule for rule in client.application.url_map.iter_rules()
             if rule.rule.startswith("/api/") and rule.endpoint != "api.lab_endpoint"]
    assert len(rules) >= 15 and all(callable(getattr(views[rule.endpoint], "openapi", None)) for rule in rules)
    source = (PROJECT_ROOT / "app" / "web" / "openapi.py").read_text()
    assert not re.findall(r'(?<![f\w])"/api/models[^"]*"', source)  # the lab's paths are made from declarations


@schema.include(path_regex="/variants").parametrize()
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_variant_routes_never_fail_on_the_server_whatever_they_are_sent(case):
    """A learner's variants are where a client's numbers reach a training: 150 bodies, paths and headers each,
    knobs of any JSON number or string, never a 5xx (trainings refused as over any budget: a documented 429)."""
    from schemathesis.checks import not_a_server_error

    case.call_and_validate(headers={"Accept-Encoding": "identity"}, checks=[not_a_server_error])


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms_and_never_fails_on_the_server(case):
    excluded = []
    intervened = isinstance(case.body, dict) and "interventions" in case.body
    beyond = case.operation.definition.raw.get("x-checked-beyond-schema")  # fields the document says more of
    if intervened or beyond or case.operation.path.endswith(("/training", "/interventions/options", "/activations")):
        # Valid by the schema but refused by design, a 400 naming the field, where the document says so of a field
        # (x-checked-beyond-schema): a masked-LM trace without MASK and without position, a position past the
        # prompt, more new tokens than the context has room for, a DataLab text without [MASK] or longer than 128
        # WordPiece tokens, an edge given in both orders, an episode started on a wall; an intervention on a node
        # that is not a module of that model's graph (or a head of a module without heads, a patch of another shape),
        # a training run's or an outline's request that is not one of the lab endpoint's (described under that
        # endpoint's path), or that names both a case and a request, or neither (said in words).
        from schemathesis.specs.openapi.checks import positive_data_acceptance
        excluded.append(positive_data_acceptance)
    # The in-process WSGI transport does not decompress: ask for plain bodies.
    case.call_and_validate(headers={"Accept-Encoding": "identity"}, excluded_checks=excluded)


def conforms(answer, schema: dict) -> None:
    """The answer holds exactly what its schema in the served document says (formats checked too)."""
    document = app.test_client().get("/api/openapi.json").get_json()
    validator = Draft202012Validator(schema | {"components": document["components"]}, format_checker=FormatChecker())
    errors = [f"{list(e.absolute_path)[:6]}: {e.message[:200]}" for e in validator.iter_errors(answer.get_json())]
    assert errors == [], errors[:5]


def answer_schema(path: str, method: str, status: int = 200) -> dict:
    document = app.test_client().get("/api/openapi.json").get_json()
    response = document["paths"][path][method]["responses"][str(status)]
    if "$ref" in response:
        response = document["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    return response["content"]["application/json"]["schema"]


def test_a_masked_lm_checkpoints_datalab_answer_conforms_too(make_app, tmp_path):
    """The module's app reads the packaged encoder; a checkpoint with the MLM head answers the other stages."""
    masked = make_app(TestConfig)
    masked.config["BERT_CHECKPOINT"] = str(make_checkpoint(tmp_path / "masked"))
    answer = masked.test_client().post("/api/models/bert-base/datalab",
                                       json={"text": "the [MASK] sat .", "other": "a dog ran ."})
    assert {"top", "softmax", "prediction", "similarity"} <= set(answer.get_json())
    conforms(answer, answer_schema("/api/models/bert-base/datalab", "post"))


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_every_answer_about_a_model_conforms_to_its_schema(slug):
    """Its manifest, files, verification report, a job from 202 to done, and each lab endpoint's answer on the
    request the recorder checks it with: each validated against the served document, strictly."""
    client = app.test_client()
    with app.app_context():
        from app.services.extensions import models

        model = models.catalog.models[slug]
    conforms(client.get("/api/models"), answer_schema("/api/models", "get"))
    conforms(client.get(f"/api/models/{slug}"), answer_schema("/api/models/{slug}", "get"))
    conforms(client.get(f"/api/models/{slug}/files"), answer_schema("/api/models/{slug}/files", "get"))
    app.config["VERIFY_WAIT"] = 0.0
    started = client.post(f"/api/models/{slug}/verifications")
    conforms(started, answer_schema("/api/models/{slug}/verifications", "post", started.status_code))
    report = started.get_json() if started.status_code == 200 else None
    if started.status_code == 202:
        for _ in range(600):
            job = client.get(started.headers["Location"])
            conforms(job, answer_schema("/api/models/{slug}/verifications/{job_id}", "get"))
            if job.get_json()["state"] == "done":
                break
            time.sleep(0.1)
        report = job.get_json()["report"]
        assert report["status"] in ("passed", "error"), str(report)[:3000]
        kept = client.post(f"/api/models/{slug}/verifications")
        conforms(kept, answer_schema("/api/models/{slug}/verifications", "post", kept.status_code))
    # A busy server may refuse the run (429, in the POST's schema), and a job the poll itself ends (a heartbeat
    # late past JOB_STALE_SECONDS on a loaded machine) leaves no latest report: the latest is then the 404.
    latest = client.get(f"/api/models/{slug}/verifications/latest")
    made = report is not None and "no heartbeat" not in report.get("message", "")
    assert latest.status_code == (200 if made else latest.status_code) and latest.status_code in (200, 404), report
    conforms(latest, answer_schema("/api/models/{slug}/verifications/latest", "get", latest.status_code))
    if model.checkpoint is None or model.manifest["experiment"]["cases"]:  # a checkpoint's lab needs it here
        drawn = client.post(f"/api/models/{slug}/activations", json=lab_subject(model))
        assert drawn.status_code == 200, drawn.get_json()
        conforms(drawn, answer_schema("/api/models/{slug}/activations", "post"))
    if not model.has_lab:
        return
    presets = model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab)
    for name, endpoint in model.lab.endpoints.items():
        request = model.lab.kind.example(name, presets, model.lab)
        if request is None:
            continue
        path = f"/api/models/{slug}/{name}"
        if endpoint.method == "GET":
            query = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in request.items()}
            answer = client.get(path, query_string=query)
        else:
            answer = client.post(path, json=request)
        assert answer.status_code == 200, answer.get_json()
        conforms(answer, answer_schema(path, endpoint.method.lower()))


def test_interventions_training_the_datalab_and_errors_conform_to_their_schemas():
    client = app.test_client()
    intervened = client.post("/api/models/gpt/interventions", json={
        "case": "pi", "interventions": [{"node": "h.0.attn", "action": "zero"}, {"node": "h.1.attn", "head": 1,
                                                                                 "action": "scale", "factor": 2}]})
    assert intervened.status_code == 200
    conforms(intervened, answer_schema("/api/models/{slug}/interventions", "post"))
    on_trace = client.post("/api/models/gpt/interventions", json={
        "endpoint": "trace", "request": {"input_ids": [1, 3, 6]}, "interventions": [{"node": "h.0", "action": "zero"}]})
    conforms(on_trace, answer_schema("/api/models/{slug}/interventions", "post"))
    datalab = client.post("/api/models/bert-base/datalab", json={"text": "the [MASK] sat on the mat ."})
    assert datalab.status_code == 200  # no recorded case to make an example of: the checkpoint's own run
    conforms(datalab, answer_schema("/api/models/bert-base/datalab", "post"))
    stages = client.post("/api/models/lenet/training", json={"case": "zero"})
    assert stages.status_code == 200
    conforms(stages, answer_schema("/api/models/{slug}/training", "post"))
    for path, status in (("/api/models/nope", 404), ("/api/models/gpt/trace?input_ids=99", 400)):
        answer = client.get(path)
        assert answer.status_code == status
        conforms(answer, answer_schema("/api/models/{slug}/files", "get", 404))


@pytest.fixture(scope="module", autouse=True)
def stop_workers():
    yield
    APPS.close()


def test_a_retraining_from_202_to_its_report_and_its_kept_copy_conform():
    client = app.test_client()
    app.config["RETRAINING_COST"] = 1
    try:
        started = client.post("/api/models/gcn/retrainings")
    finally:
        app.config["RETRAINING_COST"] = 10**6
    path = "/api/models/{slug}/retrainings"
    conforms(started, answer_schema(path, "post", started.status_code))
    location = started.headers.get("Location")
    for _ in range(600):
        if location is None:
            break
        job = client.get(location)
        conforms(job, answer_schema(path + "/{job_id}", "get"))
        if job.get_json()["state"] == "done":
            ended = client.delete(location)
            assert ended.status_code == 409
            conforms(ended, answer_schema(path + "/{job_id}", "delete", 409))
            break
        time.sleep(0.1)
    kept = client.post("/api/models/gcn/retrainings")
    assert kept.status_code == 200 and kept.get_json()["status"] == "passed"
    conforms(kept, answer_schema(path, "post", 200))


def test_the_verification_history_and_a_shared_report_conform():
    client = app.test_client()
    path = "/api/models/{slug}/verifications/history"
    history = client.get("/api/models/mlp/verifications/history")
    conforms(history, answer_schema(path, "get"))
    entry = {"kind": "verification", "status": "failed", "revision": "abc", "values": 3, "values_failed": 1,
             "largest_deviation": 0.5, "digest": "0" * 64,
             "environment": {"python": "3.12.1", "torch": "2.5.0", "numpy": "2.1.0", "os": "Linux 6.1", "cpu": "x",
                             "vector_extensions": [], "cpu_capability": "AVX2", "torch_threads": 1, "device": "cpu"}}
    shared = client.post("/api/models/mlp/verifications/history", json=entry)
    conforms(shared, answer_schema(path, "post", 201))
    conforms(client.get("/api/models/mlp/verifications/history"), answer_schema(path, "get"))

