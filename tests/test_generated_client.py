"""A client generated from the served document by openapi-python-client (no warning allowed) drives the API:
the catalog, a manifest, a verification from 202 to its report, a lab run of each kind, interventions, the
training stages and an error, each answer parsed into the generated models."""

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.services.config import TestConfig

from .bert_checkpoints import make_checkpoint


@pytest.fixture(scope="module")
def app(module_apps, tmp_path_factory):
    app = module_apps(TestConfig)
    app.config["BERT_CHECKPOINT"] = str(make_checkpoint(tmp_path_factory.mktemp("checkpoint")))
    return app


class Generated:
    """The generated package: its models, its operations by module, and a client that talks to the app in
    process."""

    def __init__(self, app, name: str) -> None:
        self.models = importlib.import_module(f"{name}.models")
        self.name = name
        self.client = importlib.import_module(name).Client(
            base_url="http://tensorviz.test", httpx_args={"transport": httpx.WSGITransport(app=app)})

    def call(self, operation: str):
        return importlib.import_module(f"{self.name}.api.{operation}")


@pytest.fixture(scope="module")
def api(app, tmp_path_factory):
    folder = tmp_path_factory.mktemp("generated")
    document = folder / "openapi.json"
    document.write_text(json.dumps(app.test_client().get("/api/openapi.json").get_json()))
    bin_dir = Path(sys.executable).parent  # the generator formats its output with ruff from the same environment
    done = subprocess.run([bin_dir / "openapi-python-client", "generate", "--path", document, "--meta", "none",
                           "--output-path", folder / "tensorviz_client", "--fail-on-warning"],
                          capture_output=True, text=True, env=os.environ | {"PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
    sys.path.insert(0, str(folder))
    try:
        yield Generated(app, "tensorviz_client")
    finally:
        sys.path.remove(str(folder))


def test_the_catalog_and_a_manifest(api):
    catalog = api.call("catalog.list_models").sync(client=api.client)
    assert {"bert", "gpt", "lenet"} <= {m.slug for m in catalog.models}
    manifest = api.call("catalog.get_manifest").sync(api.models.GetManifestSlug("gpt"), client=api.client)
    assert manifest.slug == "gpt" and manifest.schema_version == 1
    assert [c.id for c in manifest.experiment.cases] == ["pi", "repeats", "falling", "in-order", "test-split"]
    assert manifest.layers[0].id and manifest.provenance.captured_at.tzinfo is not None


def test_a_verification_from_202_to_its_report(api, app):
    app.config["VERIFY_WAIT"] = 0.0
    started = api.call("verification.start_verification").sync_detailed(
        api.models.StartVerificationSlug("lenet"), client=api.client)
    assert started.status_code == 202 and isinstance(started.parsed, api.models.Job)
    assert started.headers["Location"] == started.parsed.location
    poll = api.call("verification.get_verification_job")
    for _ in range(600):
        job = poll.sync(api.models.GetVerificationJobSlug("lenet"), started.parsed.id, client=api.client)
        if job.state == api.models.JobState.DONE:
            break
        time.sleep(0.1)
    assert job.finished_at >= job.created_at  # RFC 3339 times, parsed as datetimes
    assert job.report.status.value == "passed", job.report
    assert job.report.summary.values_failed == 0 and job.report.cases[0].values[0].status.value == "passed"
    kept = api.call("verification.start_verification").sync_detailed(
        api.models.StartVerificationSlug("lenet"), client=api.client)
    assert kept.status_code == 200 and kept.parsed.cached is True


def test_a_lab_run_of_each_kind(api):
    m = api.models
    runs = api.call("lab.gpt_runs").sync(client=api.client, body=m.GptRunsBody(
        input_ids=[3, 1, 4, 1, 10, 1, 1, 3], compare_with=m.GptRunsBodyCompareWith("pi")))
    assert runs.case.id == "live" and runs.record_check.status.value == "passed"
    generated = api.call("lab.gpt_generations").sync(client=api.client, body=m.GptGenerationsBody(
        input_ids=[1, 3], steps=2))
    assert len(generated.steps) == 2 and len(generated.output_ids) == 4
    trace = api.call("lab.gpt_trace").sync(client=api.client, input_ids=[1, 3, 6])  # sent input_ids=1&input_ids=3..
    assert trace.input_ids == [1, 3, 6] and trace.position == 2 and trace.stages[-1].id == "prediction"
    corrupted = api.call("lab.bert_corruptions").sync(client=api.client, body=m.BertCorruptionsBody(
        input_ids=[1, 4, 3, 2, 6, 2], seed=3))
    assert len(corrupted.positions) == 6 and corrupted.run_request.input_ids
    traced = api.call("lab.lenet_trace").sync(client=api.client, body=m.LenetTraceBody(image=[[0] * 8] * 8))
    assert traced.stages[0].id == "logit" and 0 <= traced.predicted <= 9
    datalab = api.call("lab.bert_base_datalab").sync(client=api.client, body=m.BertBaseDatalabBody(
        text="the [MASK] sat on the mat ."))
    assert datalab.prediction.token and len(datalab.layers) == datalab.checkpoint.layers + 1


def test_interventions_training_and_an_error(api):
    m = api.models
    intervened = api.call("interventions.intervene").sync(m.InterveneSlug("gpt"), client=api.client, body=(
        m.InterveneBody(case="pi", interventions=[m.Intervention(node="h.0.attn", action=m.InterventionAction.ZERO)])))
    assert intervened.effects.additional_properties["h.0.attn"] > 0
    assert intervened.items.additional_properties["loss"].delta != 0
    stages = api.call("training.training_stages").sync(m.TrainingStagesSlug("lenet"), client=api.client,
                                                      body=m.TrainingStagesBody(case=m.TrainingStagesBodyCase("zero")))
    assert stages.stages[0].id and stages.stages[-1].weights.additional_properties
    refused = api.call("lab.bert_runs").sync_detailed(client=api.client, body=m.BertRunsBody(
        input_ids=[1, 2, 3], segment_ids=[0, 0, 0], mlm_positions=[1], original_ids=[1, 2, 3], nsp_label=0))
    assert refused.status_code == 400 and refused.parsed.error.message.startswith("input_ids:")
