"""Every answer is strict JSON: no NaN or Infinity anywhere, whatever the model, endpoint or input."""

import json

import pytest

from .conftest import ModelTree


def strict(raw: bytes):
    """Parse as a strict JSON parser would: NaN, Infinity and -Infinity are errors."""
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(raw, parse_constant=refuse)


def smallest(field):
    """The smallest value a field accepts: its first choice, its least number, that many times for a list (as
    many as it must hold) and in every cell of a grid."""
    if field.type == "choice":
        return field.values[0]
    least = int(field.min or 0) if field.type in ("int", "ints", "grid") else float(field.min or 0)
    if field.type == "grid":
        return [[least] * field.cols for _ in range(field.rows)]
    if field.type in ("ints", "numbers"):
        return [least] * (field.length or field.min_length or 1)
    return least


def test_every_lab_endpoint_of_every_model_answers_strict_json(packaged_app):
    from app.services.extensions import models

    app, client = packaged_app, packaged_app.test_client()
    with app.app_context():
        served = list(models.catalog.models.values())
    checked = 0
    for model in served:
        if model.lab is None:
            continue
        presets = model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab)
        for name, endpoint in model.lab.endpoints.items():
            # A recording made without its checkpoint has no case to start from: the kind's example request.
            preset = presets[0]["request"] if presets else model.lab.kind.example(name, [], model.lab)
            body = {k: v for k, v in preset.items() if k in endpoint.fields}
            example = model.lab.kind.example(name, presets, model.lab) or {}
            for field in endpoint.fields.values():  # a required field no preset carries: the kind's example, or the
                if field.required and field.name not in body:  # smallest value it takes
                    body[field.name] = example.get(field.name, smallest(field))
            if "steps" in endpoint.fields:
                # As few as it takes: a generation must fit in the context a recorded prompt leaves.
                body["steps"] = max(1, smallest(endpoint.fields["steps"]))
            url = f"/api/models/{model.slug}/{name}"
            if endpoint.method == "GET":
                query = "&".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in body.items())
                response = client.get(f"{url}?{query}")
            else:
                response = client.post(url, json=body)
            assert response.status_code == 200, (url, response.get_json())
            strict(response.data)
            checked += 1
    assert checked >= 9  # bert 3, gpt 3, lenet 2, bert-base 1


@pytest.mark.parametrize("position", range(6))
def test_a_causal_trace_is_strict_json_at_every_position_with_masked_keys_named(client, position):
    query = f"input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position={position}&attention=causal"
    response = client.get(f"/api/models/bert/trace?{query}")
    assert response.status_code == 200
    body = strict(response.data)
    attention = next(s for s in body["stages"] if s["id"] == "attention")
    for head in attention["heads"]:
        assert head["masked"] == list(range(position + 1, 6))
        assert all(head["scores"][j] is None for j in head["masked"])
        assert all(isinstance(v, float) for j, v in enumerate(head["scores"]) if j <= position)


def test_the_api_and_reports_answer_strict_json(client):
    for path in ("/api/models", "/api/models/bert", "/api/models/gpt/files", "/api/openapi.json"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        strict(answer.data)
    started = client.post("/api/models/lenet/verifications")
    assert started.status_code in (200, 202), started.get_json()
    strict(started.data)


NAN_LAB = ("def live_run(**request):\n"
           "    return {'matrices': [], 'vectors': [{'key': 'v', 'label': 'v', 'values': [float('nan')]}]}\n")
NAN_RUN = ("\n\n_replay = replay\n\n\ndef replay(model=None):\n    result = _replay(model)\n"
           "    result['cases']['mask-a']['metrics'][0]['value'] = float('inf')\n    return result\n")


def test_a_recipe_that_answers_nan_gets_a_clear_error_not_broken_json(make_app, tmp_path):
    from app.services.config import TestConfig

    from .conftest import BERT_MANIFEST, BERT_RECIPE

    tree = ModelTree(tmp_path)
    tree.add("bert", BERT_MANIFEST.read_bytes(), lab_py=NAN_LAB, run_py=(BERT_RECIPE / "run.py").read_text() + NAN_RUN)
    app = make_app(type("Nan", (TestConfig,), tree.config(VERIFY_WAIT=60)))
    client = app.test_client()
    run = client.post("/api/models/bert/runs", json={"input_ids": [1, 4, 3, 2, 6, 2],
                                                     "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2]})
    assert run.status_code == 503 and "NaN or infinity" in strict(run.data)["error"]["message"]
    report = strict(client.post("/api/models/bert/verifications").data)
    assert report["status"] == "failed"
    [case] = [c for c in report["cases"] if c["status"] == "failed"]
    assert case["id"] == "mask-a"
    [value] = [v for v in case["values"] if v["status"] == "failed"]
    assert value["kind"] == "metric" and value["replayed_at_worst"] is None  # infinity, said as null


def test_a_compact_answer_is_written_by_orjson_where_it_can_be_and_never_with_a_nan(app):
    """jsonify writes the same data the standard library would, by orjson (UTF-8 where the standard library
    escapes: how to tell them apart) also beside nulls; a NaN or infinity, even beside a null, is refused as
    before; what only Flask's own default writes (a date) is written by it."""
    import datetime

    from flask import jsonify

    data = {"b": [None, 1.5, 2, True], "a": "nesting — as in training", "nested": [[0.1, None], {"x": 1e-7}]}
    with app.test_request_context():
        written = jsonify(data).data
        assert "—".encode() in written and strict(written) == data
        for bad in ([None, float("nan")], {"v": [1.0, [None, float("-inf")], "s"]}):
            with pytest.raises(ValueError):
                jsonify(bad)
        assert strict(jsonify({"when": datetime.date(2026, 12, 2)}).data) == {"when": "Wed, 02 Dec 2026 00:00:00 GMT"}
