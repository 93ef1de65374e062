"""The compute service: one admission, one error table, one way to run a recipe for a request."""

import pytest

from app.compute.errors import (
    ComputeUnavailable,
    PoolBusy,
    RecipeCrashed,
    RecipeError,
    RecipeRefused,
    RecipeTimeout,
    RecipeUnavailable,
)
from app.compute.messages import CaptureArgs, RecipeCall
from app.compute.pool import WorkerPool
from app.domain.checkpoints import CheckpointUnavailable
from app.domain.labs.fields import FieldError
from app.services import runs
from app.services.parts import parts
from app.services.refusals import BudgetSpent, ModelMissing, NoLiveLab
from app.web.errors import status_of

from .conftest import BERT_RECIPE


@pytest.mark.parametrize(("error", "status"), [
    (PoolBusy("full"), 429), (RecipeTimeout("slow"), 504), (RecipeCrashed("died"), 503),
    (RecipeError("raised"), 503), (RecipeRefused("input_ids: bad"), 400), (RecipeUnavailable("no checkpoint"), 503),
    (CheckpointUnavailable("no checkpoint"), 503), (FieldError("input_ids: must be a list"), 400),
    (ComputeUnavailable("no queue"), 503), (ModelMissing("no model 'x'"), 404), (NoLiveLab("no lab"), 404),
    (BudgetSpent("spent", retry_after=3), 429)])
def test_one_table_maps_every_refusal_and_failed_run_to_its_status(error, status):
    assert status_of(error) == status


def test_a_ticket_gives_its_place_back_once_whoever_releases_it():
    pool = WorkerPool(size=1, timeout=5, torch_threads=1, seed=0, queue=0)
    pool.admit()
    ticket = runs.Ticket(pool)
    with pytest.raises(PoolBusy):
        pool.admit()
    ticket.release()
    ticket.release()  # a second release (another thread's finally) gives nothing back twice
    pool.admit()  # the one place is free again...
    with pytest.raises(PoolBusy):
        pool.admit()  # ...and only one


def test_calls_are_typed_and_the_worker_receives_plain_data():
    call = RecipeCall.lab(BERT_RECIPE, "trace", {"position": 2}, {"checkpoint": "/srv/ckpt"})
    assert call.wire() == {"recipe_dir": str(BERT_RECIPE), "module": "lab", "entry": "trace",
                           "args": {"position": 2}, "context": {"checkpoint": "/srv/ckpt"}}
    states = {"case": {"reverse": [[1.0, 2.0]]}}
    replay = RecipeCall.replay(BERT_RECIPE, states=states)
    assert replay.wire()["module"] == "replay" and replay.wire()["args"]["states"] == states
    assert RecipeCall.read(replay.wire()) == replay
    capture = RecipeCall.make(BERT_RECIPE, "capture", CaptureArgs([{"shape": [1, 6]}]))
    assert capture.wire()["args"] == {"inputs": [{"shape": [1, 6]}]} and capture.wire()["module"] == "capture"
    assert RecipeCall.read(capture.wire()) == capture  # read back into the same typed call


def test_every_message_reads_back_as_it_was_written():
    """Each message crosses to a recipe process as plain data (JSON for Celery) and is read back whole: the typed
    arguments, the steps an intervention runs, a warm-up, a reply and a failure."""
    import json

    from app.compute.messages import (
        Failure,
        InterveneArgs,
        OutlineArgs,
        Reply,
        TrainingArgs,
        Warmup,
        read_reply,
    )
    from app.domain.steps import Step

    steps = [Step("h.0.attn", "patch", "h.0.attn.c_proj", "input", head=1, heads="n_head", from_case="pi", source=0)]
    calls = [RecipeCall.make(BERT_RECIPE, "live_run", InterveneArgs({"input_ids": [1]}, steps, [{"case": "pi"}], "GPT",
                                                                  "run-key"), {"checkpoint": "/srv/ckpt"}),
             RecipeCall.make(BERT_RECIPE, "live_run", OutlineArgs([{"input_ids": [1]}], "GPT", "run-key")),
             RecipeCall.make(BERT_RECIPE, "run.replay", TrainingArgs({"case": "pi"}, "GPT")),
             RecipeCall.lab(BERT_RECIPE, "trace", {"position": 2}, {"checkpoint": "/srv"})]
    for call in calls:
        assert RecipeCall.read(json.loads(json.dumps(call.wire()))) == call
    warmup = Warmup(str(BERT_RECIPE), "load", {"checkpoint": "/srv"})
    assert Warmup.read(json.loads(json.dumps(warmup.wire()))) == warmup
    for reply in (Reply('{"a":1}', True, ["a"], {"torch": "2"}, 0.5),
                  Failure("ValueError: x", "failed", refused="request")):
        assert read_reply(json.loads(json.dumps(reply.wire()))) == reply


def test_a_failed_lab_run_leaves_no_place_taken(app, client):
    """A lab request whose run fails answers its status and gives its place back: the next one is admitted."""
    pool = parts(app).pool
    body = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2],
            "original_ids": [1, 4, 5, 2, 6, 2], "attention": "bidirectional"}

    def crash(call):
        raise RecipeCrashed("the recipe worker died")

    real, pool.run = pool.run, crash
    try:
        for label in range(pool.capacity + 2):  # more failed runs than the pool has places
            response = client.post("/api/models/bert/runs", json={**body, "nsp_label": label % 2,
                                                                  "mlm_positions": [1 + label % 4]})
            assert response.status_code == 503 and "worker died" in response.get_json()["error"]["message"]
            assert int(response.headers["Retry-After"]) > 0  # nothing was answered; a moment later may be
    finally:
        pool.run = real
    assert client.post("/api/models/bert/runs", json={**body, "nsp_label": 0}).status_code == 200


def test_a_result_is_written_once_and_read_back_as_it_was():
    import json
    import math

    from app.compute.worker import encoded

    plain = {"a": [1.5, -2e-07, 3], "b": {"c": "x"}, "d": True}
    written = encoded(plain, {}, 0.0)
    assert json.loads(written.result_json) == plain and written.finite and written.keys == ["a", "b", "d"]
    with_none = encoded({"v": [None, 1.0]}, {}, 0.0)  # null stands for None here, not for a NaN
    assert json.loads(with_none.result_json) == {"v": [None, 1.0]} and with_none.finite
    nan = encoded({"v": [math.nan, math.inf]}, {}, 0.0)
    assert not nan.finite and nan.result_json == '{"v":[NaN,Infinity]}'  # the replay's comparison reads them
    assert encoded([1, 2], {}, 0.0).keys is None
    with pytest.raises(TypeError):
        encoded({"t": object()}, {}, 0.0)


def test_both_executors_answer_the_one_declared_interface_with_its_signatures():
    import inspect

    from app.compute.celery_executor import CeleryExecutor
    from app.compute.executor import Executor

    declared = {name: inspect.signature(member) for name, member in vars(Executor).items()
                if callable(member) and not name.startswith("_")}
    assert set(declared) == {"admit", "release", "run", "retrain", "suspend", "prestart", "pids", "shutdown"}
    for executor in (WorkerPool, CeleryExecutor):
        assert issubclass(executor, Executor)
        for name, signature in declared.items():
            assert list(inspect.signature(getattr(executor, name)).parameters) == list(signature.parameters), \
                (executor.__name__, name)
