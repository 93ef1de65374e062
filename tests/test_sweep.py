"""Every change What if? can be asked for, and every lab field at its bounds, on every model: each answers 200 or a
400 that says, in words, which field or node and why; none answers a 5xx, and no message carries an exception's
own text."""

import re

import pytest

from app.domain.catalog import Model
from app.domain.labs.fields import Field
from app.services.extensions import models

from .conftest import CATALOG_SLUGS, lab_subject

RAW = re.compile(r"\b\w+(Error|Exception):|Traceback|File \"")  # how an exception's own text reads


def changeable(manifest: dict) -> list[str]:
    """Every node What if? may name: the modules and layers of the graph (ops and inputs it refuses)."""
    return [layer["id"] for layer in manifest["layers"]
            if layer["kind"] in ("module", "layer") and "@" not in layer["id"]]


FACTORS = (0.5, 3.0, -1.0)  # a shrink, a blow-up and a sign flip: each node is scaled by one, in turn
# What a run answers when it was asked for a change it cannot make on this input: the node never ran, its output
# has no positions to average over, a patch source that never ran it or ran it in another shape.
UNRUNNABLE = re.compile(r"does not run for this input|mean needs positions|\.from_case:")


def changes(manifest: dict, index: int, offer: dict, shown: str | None) -> list[dict]:
    """Every action on the `index`-th node, its scale by one of FACTORS in turn (every factor meets a third of the
    nodes: a model of 100 calls a run paid 40 s for the other two); a patch from a case the options offer, else
    from another recorded case where there is one."""
    steps = [{"action": "zero"}, {"action": "mean"}, {"action": "scale", "factor": FACTORS[index % len(FACTORS)]}]
    others = [case["id"] for case in manifest["experiment"]["cases"] if case["id"] != shown]
    source = (offer["from_cases"] or others[-1:] or [None])[0]
    return steps + ([{"action": "patch", "from_case": source}] if source else [])


def answered_in_words(response) -> None:
    assert response.status_code in (200, 400), (response.status_code, response.get_json())
    if response.status_code == 400:
        message = response.get_json()["error"]["message"]
        assert message and not RAW.search(message), message


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_what_if_offers_every_change_that_runs_and_no_other(packaged_app, slug):
    """Every change to every node, on the first recorded case: each answers 200 or a 400 that says, in words, which
    field or node and why. One the options offer never meets a refusal for what the input's run cannot do (a later
    part of the model may still not take its result, said as a 400); one they do not offer is refused, and the
    options say why."""
    client = packaged_app.test_client()
    manifest = client.get(f"/api/models/{slug}").get_json()
    with packaged_app.app_context():
        subject = lab_subject(models.get(slug))
    options = client.post(f"/api/models/{slug}/interventions/options", json=subject)
    assert options.status_code == 200, options.get_json()
    nodes = options.get_json()["nodes"]
    assert sorted(nodes) == sorted(changeable(manifest))
    asked = offered = 0
    for index, node in enumerate(changeable(manifest)):
        offer = nodes[node]
        for step in changes(manifest, index, offer, subject.get("case")):
            response = client.post(f"/api/models/{slug}/interventions",
                                   json=subject | {"interventions": [{"node": node} | step]})
            answered_in_words(response)
            message = response.get_json()["error"]["message"] if response.status_code == 400 else ""
            if step["action"] in offer["actions"]:
                assert not UNRUNNABLE.search(message), (node, step, message)
                offered += 1
            else:
                assert response.status_code == 400 and offer["why_not"][step["action"]], (node, step)
            asked += 1
    assert asked >= 3 * len(changeable(manifest)) > 0 and offered > 0


def bounds(field: Field) -> list:
    """Values of a declared field at its bounds (and just past them, which must be refused with a 400)."""
    low = field.min if field.min is not None else 0
    high = field.max if field.max is not None else low + 1
    if field.type in ("int", "number"):
        cast = int if field.type == "int" else float
        return [cast(low), cast(high), cast(low) - 1, cast(high) + 1]
    if field.type in ("ints", "numbers"):
        cast = int if field.type == "ints" else float
        shortest = field.length or field.min_length or 1
        longest = field.length or field.max_length or shortest
        return [[cast(low)] * shortest, [cast(high)] * longest, [cast(high)] * (longest + 1), []]
    if field.type == "grid":
        return [[[int(low)] * field.cols] * field.rows, [[int(high)] * field.cols] * field.rows,
                [[int(high) + 1] * field.cols] * field.rows]
    if field.type == "edges":
        shortest, longest = field.min_length or 1, field.max_length or 2
        pairs = [[a, b] for a in range(int(low), int(high) + 1) for b in range(a + 1, int(high) + 1)]
        return [pairs[:shortest], pairs[:longest], pairs[:longest + 1], [[int(low), int(low)]],
                [[int(low), int(high) + 1]], [pairs[0], pairs[0][::-1]]]
    if field.type == "choice":
        return [*field.values, "none of them"]
    if field.type == "text":
        return ["x" * (field.min_length or 1), "y" * (field.max_length or 10), "z" * ((field.max_length or 10) + 1)]
    raise AssertionError(f"a field type this sweep does not know: {field.type}")


def base_request(model: Model, endpoint) -> dict:
    """A request the endpoint takes: the first recorded case's, where the lab makes one, else the kind's example."""
    presets = model.lab.kind.presets(model.manifest["experiment"]["cases"], model.lab)
    if presets:
        return {k: v for k, v in presets[0]["request"].items() if k in endpoint.fields}
    return model.lab.kind.example(endpoint.name, [], model.lab)


@pytest.mark.parametrize("slug", CATALOG_SLUGS)
def test_every_lab_field_at_its_bounds_answers_200_or_a_400_in_words(packaged_app, slug):
    client = packaged_app.test_client()
    with packaged_app.app_context():
        model = models.get(slug)
    if model.lab is None:
        assert client.post(f"/api/models/{slug}/runs", json={}).status_code == 404
        return
    for name, endpoint in model.lab.endpoints.items():
        base = base_request(model, endpoint)
        for field_name, field in endpoint.fields.items():
            for value in bounds(field):
                body = base | {field_name: value}
                if endpoint.method == "POST":
                    answered_in_words(client.post(f"/api/models/{slug}/{name}", json=body))
                else:
                    query = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in body.items()}
                    answered_in_words(client.get(f"/api/models/{slug}/{name}", query_string=query))
