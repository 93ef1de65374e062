"""The API contract: the OpenAPI document covers every route, and every operation honours it."""

import re
import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate

from app import create_app
from app.services.config import TestConfig
from app.services.parts import parts

from .bert_checkpoints import make_checkpoint

app = create_app(TestConfig)
# The checkpoint model answers with a (small, random) checkpoint, so that its DataLab runs; without one its
# operations answer the documented 503.
app.config["BERT_CHECKPOINT"] = str(make_checkpoint(Path(tempfile.mkdtemp(prefix="tensorviz-openapi-"))))
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)


def test_the_document_is_valid_openapi_3(client):
    document = client.get("/api/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    validate(document)


def test_every_api_route_is_described(client):
    document = client.get("/api/openapi.json").get_json()
    for rule in client.application.url_map.iter_rules():
        if rule.endpoint == "api.lab_endpoint":
            # One route serves every model's declared lab endpoints; each is described under its own path.
            with client.application.app_context():
                from app.services.extensions import models

                for model in models.catalog.models.values():
                    for name, endpoint in (model.lab.endpoints.items() if model.has_lab else []):
                        assert set(document["paths"][f"/api/models/{model.slug}/{name}"]) == {endpoint.method.lower()}
        elif rule.rule.startswith("/api/"):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            assert path in document["paths"], path
            described = set(document["paths"][path])
            assert {m.lower() for m in rule.methods - {"HEAD", "OPTIONS"}} == described, path


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms_and_never_fails_on_the_server(case):
    excluded = []
    intervened = isinstance(case.body, dict) and "interventions" in case.body
    if intervened or case.operation.path.endswith(("/trace", "/generations", "/datalab", "/training")):
        # Valid by the schema but refused by design, a 400 naming the field: a masked-LM trace without MASK
        # and without position, a position past the prompt, more new tokens than the context has room for,
        # a DataLab text without [MASK] or longer than 128 WordPiece tokens, an intervention on a node that is
        # not a module of that model's graph (or a head of a module without heads, a patch of another shape),
        # a training run's request that is not one of the lab endpoint's (described under that endpoint's path).
        from schemathesis.specs.openapi.checks import positive_data_acceptance
        excluded.append(positive_data_acceptance)
    # The in-process WSGI transport does not decompress: ask for plain bodies.
    case.call_and_validate(headers={"Accept-Encoding": "identity"}, excluded_checks=excluded)


@pytest.fixture(scope="module", autouse=True)
def stop_workers():
    yield
    parts(app).pool.shutdown()
