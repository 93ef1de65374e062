"""The live lab: what-if runs, the corruption sampler and the trace, through the API and in the recipe."""

import math
import re
from collections import Counter

import pytest

from app.domain.compare import compare_case, tolerance_for
from app.domain.labs import masked_lm
from app.services.config import PROJECT_ROOT
from app.services.extensions import models

from .conftest import BERT_RECIPE, bert_manifest, recipe_module

recipe_lab = recipe_module(BERT_RECIPE, "lab")

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2],
       "original_ids": [1, 4, 5, 2, 6, 2], "nsp_label": 0, "attention": "bidirectional"}
TRACE = "/api/models/bert/trace?input_ids=1,4,3,2,6,2&segment_ids=0,0,0,0,1,1&position=2&attention=bidirectional"


@pytest.fixture(scope="module")
def lab_client(module_app):
    return module_app.test_client()


def values(case: dict, key: str):
    for item in case["matrices"] + case["vectors"]:
        if item["key"] == key:
            return item["values"]
    raise KeyError(key)


def bert_lab(app):
    with app.app_context():
        return models.get("bert").lab


# ---- what-if runs


def test_limits_come_from_the_recorded_graph_and_the_declaration(app):
    spec = bert_lab(app)
    assert spec.sizes == {"length": 6, "vocab": 16, "segments": 2}
    assert spec.special == {"CLS": 1, "SEP": 2, "MASK": 3}
    assert spec.endpoints["runs"].fields["input_ids"].max == 15


@pytest.mark.parametrize("case", bert_manifest()["experiment"]["cases"], ids=lambda c: c["id"])
def test_live_run_of_each_recorded_case_matches_its_record(app, lab_client, case):
    request = next(p["request"] for p in masked_lm.KIND.presets([case], bert_lab(app)))
    assert request["nsp_label"] == (1 if case["id"] == "not-next" else 0)
    response = lab_client.post("/api/models/bert/runs", json=request | {"compare_with": case["id"]})
    assert response.status_code == 200
    body = response.get_json()
    assert body["kind"] == "runs" and body["recorded"] is False and "not a recorded value" in body["note"]
    result = compare_case(case, body["case"], tolerance_for(bert_manifest()))
    assert result["status"] == "passed", [v for v in result["values"] if v["status"] != "passed"]
    assert body["record_check"]["status"] == "passed"
    assert all(v["worst_ratio"] <= 1 for v in body["record_check"]["values"])


def test_the_server_says_when_a_live_run_does_not_reproduce_the_case_it_names(lab_client):
    body = lab_client.post("/api/models/bert/runs", json=RUN | {"compare_with": "mask-b"}).get_json()
    assert body["record_check"]["status"] == "failed"
    response = lab_client.post("/api/models/bert/runs", json=RUN | {"compare_with": "nope"})
    assert response.status_code == 400 and response.get_json()["error"]["message"].startswith("compare_with")


def test_live_run_reports_every_head_and_every_selected_position(lab_client):
    body = lab_client.post("/api/models/bert/runs", json=RUN | {"mlm_positions": [2, 4]}).get_json()
    case = body["case"]
    assert [m["key"] for m in case["matrices"]] == ["attention_head_0", "attention_head_1", "probabilities"]
    for p in (2, 4):
        assert sum(values(case, f"probabilities_at_{p}")) == pytest.approx(1, abs=1e-6)
    assert sum(values(case, "nsp_probabilities")) == pytest.approx(1, abs=1e-6)
    metrics = {m["key"]: m["value"] for m in case["metrics"]}
    assert metrics["total_loss"] == pytest.approx(metrics["mlm_loss"] + metrics["nsp_loss"], abs=1e-5)
    assert {"python", "torch"} <= set(body["environment"])


def test_identical_requests_are_served_from_the_cache(lab_client):
    request = RUN | {"nsp_label": 1, "mlm_positions": [1, 2]}
    first = lab_client.post("/api/models/bert/runs", json=request).get_json()
    again = lab_client.post("/api/models/bert/runs", json=dict(reversed(list(request.items())))).get_json()
    assert first["cached"] is False and again["cached"] is True
    assert again["case"] == first["case"]


def earlier_rows(client, attention: str, later_token: int) -> list[list[float]]:
    request = RUN | {"attention": attention, "input_ids": [1, 4, 3, 2, later_token, 2]}
    case = client.post("/api/models/bert/runs", json=request).get_json()["case"]
    return values(case, "probabilities")[:4]


def test_causal_runs_ignore_later_tokens_while_bidirectional_runs_do_not(lab_client):
    causal = earlier_rows(lab_client, "causal", 6), earlier_rows(lab_client, "causal", 9)
    assert causal[0] == causal[1]
    both = earlier_rows(lab_client, "bidirectional", 6), earlier_rows(lab_client, "bidirectional", 9)
    shift = max(abs(a - b) for ra, rb in zip(*both, strict=True) for a, b in zip(ra, rb, strict=True))
    assert shift > 1e-3
    attention = lab_client.post("/api/models/bert/runs", json=RUN | {"attention": "causal"}).get_json()["case"]
    head = values(attention, "attention_head_0")
    assert all(head[i][j] == 0 for i in range(6) for j in range(i + 1, 6))


@pytest.mark.parametrize("change, field", [
    ({"input_ids": [1, 2, 3]}, "input_ids: must hold exactly 6 values, not 3"),
    ({"input_ids": [1, 4, 3, 2, 6, 16]}, "input_ids[5]: 16 is out of range 0..15"),
    ({"input_ids": [1, 4, 3, 2, 6, -1]}, "input_ids[5]: -1 is out of range 0..15"),
    ({"input_ids": [1, 4, 3, 2, 6, 2.5]}, "input_ids[5]: must be an integer, not float"),
    ({"input_ids": [1, 4, 3, 2, 6, "2"]}, "input_ids[5]: must be an integer, not str"),
    ({"input_ids": "1,4,3,2,6,2"}, "input_ids: must be a list of integers"),
    ({"segment_ids": [0, 0, 0, 0, 1, 2]}, "segment_ids[5]: 2 is out of range 0..1"),
    ({"mlm_positions": []}, "mlm_positions: must hold at least 1 value"),
    ({"mlm_positions": [6]}, "mlm_positions[0]: 6 is out of range 0..5"),
    ({"mlm_positions": [2, 2]}, "mlm_positions: names a value twice"),
    ({"mlm_positions": [True]}, "mlm_positions[0]: must be an integer, not bool"),
    ({"original_ids": [1, 4, 5, 2, 6]}, "original_ids: must hold exactly 6 values, not 5"),
    ({"nsp_label": 2}, "nsp_label: 2 is out of range 0..1"),
    ({"attention": "sideways"}, "attention: must be one of bidirectional, causal"),
    ({"temperature": 1}, "temperature: unknown field"),
])
def test_bad_run_requests_name_the_field(client, change, field):
    response = client.post("/api/models/bert/runs", json=RUN | change)
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith(field)


def test_an_integral_number_is_an_integer_as_the_document_counts_it(client):
    """JSON Schema (so the OpenAPI document and every client generated from it) counts 2.0 as the integer 2."""
    plain = client.post("/api/models/bert/runs", json=RUN).get_json()
    written = client.post("/api/models/bert/runs", json=RUN | {"input_ids": [float(t) for t in RUN["input_ids"]]})
    assert written.status_code == 200
    assert written.get_json()["request"] == plain["request"]
    assert written.get_json()["case"] == plain["case"]


@pytest.mark.parametrize("body", [b"", b"{not json", b"[1, 2]", b"null", b"6"])
def test_a_body_that_is_not_an_object_is_400(client, body):
    response = client.post("/api/models/bert/runs", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"]["message"].startswith("body:")


def test_missing_required_fields_are_named(client):
    response = client.post("/api/models/bert/runs", json={"input_ids": RUN["input_ids"]})
    assert response.get_json()["error"]["message"] == "mlm_positions: is required"


def test_segments_left_out_are_the_kind_s_default_and_the_answer_says_which(lab_client):
    """One rule for default segments (A up to and including the first SEP, B after it), in the lab kind:
    the page and the recipe read what the server answers."""
    body = {k: v for k, v in RUN.items() if k != "segment_ids"}
    answer = lab_client.post("/api/models/bert/runs", json=body).get_json()
    assert answer["request"]["segment_ids"] == [0, 0, 0, 0, 1, 1]  # input 1 4 3 2 | 6 2: SEP (2) at 3
    draw = lab_client.post("/api/models/bert/corruptions", json={"input_ids": [1, 4, 2, 5, 6, 2], "seed": 0})
    assert draw.get_json()["run_request"]["segment_ids"] == [0, 0, 0, 1, 1, 1]


def test_oversized_run_body_is_refused(client):
    response = client.post("/api/models/bert/runs", data=b"[" + b"1," * 40000 + b"1]",
                           content_type="application/json")
    assert response.status_code == 413
    assert "request body over" in response.get_json()["error"]["message"]


def test_lab_on_an_unknown_model_is_404(client):
    assert client.post("/api/models/nope/runs", json=RUN).status_code == 404


# ---- the corruption sampler


def test_corruption_api_answers_a_run_ready_draw(lab_client):
    response = lab_client.post("/api/models/bert/corruptions", json={"input_ids": [1, 4, 5, 2, 6, 2], "seed": 7})
    body = response.get_json()
    assert response.status_code == 200 and body["kind"] == "corruptions" and body["seed"] == 7
    assert [p["selected"] for p in body["positions"]].count(True) == 1
    chosen = next(p for p in body["positions"] if p["selected"])
    assert chosen["action"] in ("mask", "random", "unchanged")
    assert body["run_request"]["mlm_positions"] == [chosen["position"]]
    assert body["run_request"]["segment_ids"] == [0, 0, 0, 0, 1, 1]
    run = lab_client.post("/api/models/bert/runs", json=body["run_request"])
    assert run.status_code == 200
    again = lab_client.post("/api/models/bert/corruptions", json={"input_ids": [1, 4, 5, 2, 6, 2], "seed": 7})
    assert again.get_json()["positions"] == body["positions"]


@pytest.mark.parametrize("body, message", [
    ({"input_ids": [1, 4, 5, 2, 6, 2]}, "seed: is required"),
    ({"input_ids": [1, 4, 5, 2, 6, 2], "seed": -1}, "seed: -1 is out of range 0..9223372036854775807"),
    ({"input_ids": [1, 4, 5, 2, 6, 2], "seed": 2**63},
     "seed: 9223372036854775808 is out of range 0..9223372036854775807"),  # integers in full
    ({"input_ids": [1, 4, 5, 2, 6, 2], "seed": "x"}, "seed: must be an integer"),
    ({"input_ids": [1, 4, 5], "seed": 1}, "input_ids: must hold exactly 6 values"),
    ({"input_ids": [1, 4, 5, 2, 6, 2], "seed": 1, "rate": 0.2}, "rate: unknown field"),
])
def test_bad_corruption_requests_name_the_field(client, body, message):
    response = client.post("/api/models/bert/corruptions", json=body)
    assert response.status_code == 400 and response.get_json()["error"]["message"].startswith(message)


def test_sampler_proportions_are_80_10_10():
    actions = Counter()
    for seed in range(20000):
        draw = recipe_lab.sample_corruption([1, 4, 5, 2, 6, 2], seed, [0] * 6)
        actions.update(p["action"] for p in draw["positions"] if p["selected"])
    total = sum(actions.values())
    assert total == 20000  # round(15% of 6) = 1 per sequence
    # 5 standard deviations at n = 20000 is under 0.015: a 70/20/10 sampler is 0.1 away
    assert abs(actions["mask"] / total - 0.8) < 0.015
    assert abs(actions["random"] / total - 0.1) < 0.015
    assert abs(actions["unchanged"] / total - 0.1) < 0.015


def test_sampler_selects_15_percent_uniformly_and_never_cls_or_sep():
    sequence = [1] + list(range(4, 16)) * 8 + [2]  # 98 tokens, 96 candidates
    hits = Counter()
    for seed in range(2000):
        draw = recipe_lab.sample_corruption(sequence, seed, [0] * len(sequence))
        assert len(draw["mlm_positions"]) == round(len(sequence) * 0.15) == 15
        assert 0 not in draw["mlm_positions"] and len(sequence) - 1 not in draw["mlm_positions"]
        hits.update(draw["mlm_positions"])
    expected = 2000 * 15 / 96
    assert set(hits) <= set(range(1, 97))
    assert all(abs(count - expected) < 6 * expected**0.5 for count in hits.values())


def test_sampler_is_reproducible_and_random_tokens_come_from_the_vocabulary():
    draw = recipe_lab.sample_corruption([1, 4, 5, 2, 6, 2], 3, [0] * 6)
    assert draw == recipe_lab.sample_corruption([1, 4, 5, 2, 6, 2], 3, [0] * 6)
    randoms = Counter()
    for seed in range(4000):
        for p in recipe_lab.sample_corruption([1, 4, 5, 2, 6, 2], seed, [0] * 6)["positions"]:
            if p["action"] == "random":
                randoms[p["token"]] += 1
            if p["action"] == "mask":
                assert p["token"] == 3
            if p["action"] == "unchanged":
                assert p["token"] == p["original"]
    assert set(randoms) <= set(range(16)) and len(randoms) > 10


# ---- the trace


@pytest.fixture(scope="module")
def traced(lab_client):
    response = lab_client.get(TRACE)
    assert response.status_code == 200
    return response.get_json()


def stage(trace: dict, name: str) -> dict:
    return next(s for s in trace["stages"] if s["id"] == name)


def close(a: list[float], b: list[float], tol: float = 1e-5) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_trace_walks_every_stage_with_a_caption(traced):
    assert traced["kind"] == "trace" and traced["position"] == 2 and traced["recorded"] is False
    assert [s["id"] for s in traced["stages"]] == ["tokens", "embeddings", "embedding_norm", "attention",
                                                  "attention_output", "ffn_up", "ffn_down", "mlm_head",
                                                  "logits", "softmax", "nsp"]
    assert all(len(s["caption"]) > 40 for s in traced["stages"])


def test_each_stage_feeds_the_next(traced):
    emb = stage(traced, "embeddings")
    summed = [w + p + s for w, p, s in zip(emb["word"], emb["position_embedding"], emb["segment"], strict=True)]
    assert close(summed, emb["values"])
    assert stage(traced, "embedding_norm")["input"] == emb["values"]
    att = stage(traced, "attention_output")
    assert close([x + a for x, a in zip(stage(traced, "embedding_norm")["values"], att["projected"], strict=True)],
                 att["residual_sum"])
    ffn = stage(traced, "ffn_up")
    assert len(ffn["before_gelu"]) == 32 and sorted(ffn["passed"] + ffn["suppressed"]) == list(range(32))
    assert all(abs(ffn["after_gelu"][i]) < 0.2 for i in ffn["suppressed"])
    down = stage(traced, "ffn_down")
    assert close([x + d for x, d in zip(att["values"], down["down"], strict=True)], down["residual_sum"])
    for h in stage(traced, "attention")["heads"]:
        assert sum(h["weights"]) == pytest.approx(1, abs=1e-6)
        assert len(h["top_context"]) == 2 and all(c["position"] != 2 for c in h["top_context"])
        top = sorted((w, j) for j, w in enumerate(h["weights"]) if j != 2)[-1]
        assert h["top_context"][0]["position"] == top[1]


def test_logits_are_dot_products_with_the_tied_embedding_and_softmax_sums_to_one(traced):
    logits = stage(traced, "logits")
    for row in logits["table"]:
        assert row["dot"] + row["bias"] == pytest.approx(row["logit"], abs=1e-5)
    assert logits["table"][0]["token"] == max(range(16), key=logits["values"].__getitem__)
    soft = stage(traced, "softmax")
    assert sum(r["probability"] for r in soft["table"]) == pytest.approx(1, abs=1e-6)
    assert sum(r["exp"] for r in soft["table"]) == pytest.approx(soft["sum_exp"])
    for row in soft["table"]:
        assert row["exp"] / soft["sum_exp"] == pytest.approx(row["probability"], abs=1e-6)
    assert soft["predicted"] == logits["table"][0]["token"] == 1


def test_cls_path_feeds_the_sentence_pair_head(traced, lab_client):
    """The pair head reads CLS's output (position 0), whichever position is traced."""
    at_cls = lab_client.get(TRACE.replace("position=2", "position=0")).get_json()
    assert traced["position"] == 2
    nsp = stage(traced, "nsp")
    assert nsp["cls"] == stage(at_cls, "ffn_down")["values"] == stage(at_cls, "nsp")["cls"]
    assert nsp["cls"] != stage(traced, "ffn_down")["values"]  # not the traced token's output
    assert len(nsp["pooler"]) == len(nsp["tanh"]) == 8
    assert close([math.tanh(x) for x in nsp["pooler"]], nsp["tanh"])
    assert sum(nsp["values"]) == pytest.approx(1, abs=1e-6)
    assert nsp["predicted"] == ["IsNext", "NotNext"][nsp["values"].index(max(nsp["values"]))]


def test_trace_probabilities_equal_the_runs(lab_client, traced):
    case = lab_client.post("/api/models/bert/runs", json=RUN).get_json()["case"]
    assert stage(traced, "softmax")["values"] == values(case, "probabilities_at_2")
    assert stage(traced, "nsp")["values"] == values(case, "nsp_probabilities")


def test_trace_position_defaults_to_the_first_mask(lab_client):
    body = lab_client.get("/api/models/bert/trace?input_ids=1,4,5,2,3,2").get_json()
    assert body["position"] == 4 and body["segment_ids"] == [0, 0, 0, 0, 1, 1]


def test_a_list_travels_comma_separated_or_one_value_per_repetition(lab_client):
    """`input_ids=1,4,5` as the pages link, `input_ids=1&input_ids=4&input_ids=5` as generated clients send it."""
    commas = lab_client.get("/api/models/bert/trace?input_ids=1,4,5,2,3,2").get_json()
    repeated = lab_client.get("/api/models/bert/trace?" + "&".join(f"input_ids={t}" for t in (1, 4, 5, 2, 3, 2)))
    assert repeated.status_code == 200
    assert repeated.get_json()["stages"] == commas["stages"] and repeated.get_json()["request"] == commas["request"]


@pytest.mark.parametrize("query, message", [
    ("", "input_ids: is required"),
    ("input_ids=1,4,x,2,6,2", "input_ids: must be comma-separated integers"),
    ("input_ids=1,4,3,2,6", "input_ids: must hold exactly 6 values"),
    ("input_ids=1,4,5,2,6,2", "position: is required when input_ids holds no MASK (3)"),
    ("input_ids=1,4,3,2,6,2&position=9", "position: 9 is out of range 0..5"),
    ("input_ids=1,4,3,2,6,2&position=two", "position: must be an integer"),
    ("input_ids=1,4,3,2,6,2&attention=left", "attention: must be one of"),
    ("input_ids=1,4,3,2,6,2&layer=3", "layer: unknown parameter"),
    ("input_ids=1,4,3,2,6,2&position=1&position=2", "position: is given 2 times; give it once"),
])
def test_bad_trace_queries_name_the_parameter(client, query, message):
    response = client.get(f"/api/models/bert/trace?{query}")
    assert response.status_code == 400 and response.get_json()["error"]["message"].startswith(message)


def test_a_live_run_names_the_tokens_on_its_matrices_axes(lab_client):
    """Attention runs over the input tokens: each axis entry is a token's id and its name (special tokens by
    their names), so that a heatmap can be labelled with words rather than indices."""
    answer = lab_client.post("/api/models/bert/runs", json=RUN).get_json()
    axes = answer["axes"]
    heads = [m["key"] for m in answer["case"]["matrices"] if m["key"].startswith("attention")]
    assert heads and set(axes) == set(heads)
    expected = [{"id": 1, "name": "CLS"}, {"id": 4, "name": "4"}, {"id": 3, "name": "MASK"},
                {"id": 2, "name": "SEP"}, {"id": 6, "name": "6"}, {"id": 2, "name": "SEP"}]
    titled = {"rows": "query", "columns": "key"}  # an attention map says which axis reads
    assert all(axes[key] == {"rows": expected, "columns": expected, "titles": titled} for key in heads)


def test_the_causal_lab_names_prompt_tokens_and_the_vocabulary_on_its_axes(lab_client):
    answer = lab_client.post("/api/models/gpt/runs", json={"input_ids": [1, 3, 6]}).get_json()
    axes = answer["axes"]
    prompt = [{"id": 1, "name": "1"}, {"id": 3, "name": "3"}, {"id": 6, "name": "6"}]
    assert axes["attention_b0_h0"] == {"rows": prompt, "columns": prompt, "titles": {"rows": "query", "columns": "key"}}
    assert axes["next_token_probs"]["rows"] == prompt
    assert [t["name"] for t in axes["next_token_probs"]["columns"]][-3:] == ["8", "9", "="]


def test_recorded_heatmap_tables_head_rows_and_columns_with_tokens(lab_client):
    page = lab_client.get("/models/gpt?case=pi").get_data(as_text=True)  # 3 1 4 1 = 1 1 3
    assert '<th scope="col" title="column 2: token id 4">2: 4</th>' in page
    assert '<th scope="row" title="row 4: token id 10">4: =</th>' in page
    assert "data-axes=" in page
    bert = lab_client.get("/models/bert").get_data(as_text=True)
    assert '<th scope="col" title="column 2: token id 3">2: MASK</th>' in bert  # the corrupted input is what attends


def test_every_kind_is_one_folder_that_reads_only_endpoints_it_requires():
    """A kind lives in its folder (module, template, ES module, its own styles where it has some), the registry
    finds it there, and what it reads is declared per endpoint."""
    from app.domain.labs import KINDS, kind_files

    registry = PROJECT_ROOT / "app" / "domain" / "labs" / "__init__.py"
    folders = {p.name for p in registry.parent.iterdir() if (p / "__init__.py").is_file()}
    assert {kind.folder.name for kind in KINDS.values()} == folders
    imported = set(re.findall(r"^from \.(\w*) import", registry.read_text(), flags=re.M))
    assert imported and imported.isdisjoint(folders)  # the registry imports no kind by name
    for kind in KINDS.values():
        assert set(kind.reads) <= set(kind.requires["endpoints"]), kind.name
        assert {path.name for path in kind.files().values()} - {"lab.css"} == {"lab.html", "lab.js"}
        assert all(path.parent == kind.folder and path.is_file() for path in kind.files().values())
    styled = [kind for kind in KINDS.values() if kind.style]
    assert len(styled) >= 7 and len(kind_files()) == 2 * len(KINDS) + len(styled)


def selectors(css: str) -> list[str]:
    """Each rule's selector, those inside @media blocks too."""
    found, head = [], ""
    for char in re.sub(r"/\*.*?\*/", "", css, flags=re.S):
        if char == "{":
            if not head.strip().startswith("@"):
                found.append(head.strip())
            head = ""
        elif char in "};":
            head = ""
        else:
            head += char
    return found


def styled_by(css: str) -> list[tuple[str, set[str]]]:
    """Each selector group of the stylesheet, with the kinds whose elements alone it can match: a class named by one
    kind's files and nothing shared (templates, static/js, the app's modules outside the kinds) is that kind's."""
    from app.domain.labs import KINDS

    kinds = {kind.name: "".join(p.read_text() for p in kind.folder.glob("*") if p.suffix in (".html", ".js", ".py"))
             for kind in KINDS.values()}
    labs = next(iter(KINDS.values())).folder.parent
    places = (("templates", "*.html"), ("static/js", "*.js"), ("app", "*.py"))
    shared = "".join(p.read_text() for folder, pattern in places for p in (PROJECT_ROOT / folder).rglob(pattern)
                     if p.parent.parent != labs)
    named = lambda cls, text: re.search(rf"(?<![\w-]){re.escape(cls)}(?![\w-])", text)  # noqa: E731
    groups = []
    for selector in selectors(css):
        for group in selector.split(","):
            owners = set()
            for cls in re.findall(r"\.([a-zA-Z][\w-]*)", group):
                users = {name for name, text in kinds.items() if named(cls, text)}
                if len(users) == 1 and not named(cls, shared):
                    owners |= users
            groups.append((group.strip(), owners))
    return groups


def test_a_kind_s_own_styles_live_in_its_folder_and_style_only_its_own_elements():
    """site.css keeps what kinds share: no rule there matches one kind's elements alone; a kind's lab.css styles
    only elements of its own."""
    from app.domain.labs import KINDS

    site = styled_by((PROJECT_ROOT / "static" / "css" / "site.css").read_text())
    assert [(group, owners) for group, owners in site if len(owners) == 1] == []
    for kind in KINDS.values():
        if kind.style:
            own = styled_by((kind.folder / "lab.css").read_text())
            assert own and all(owners == {kind.name} for _, owners in own), (kind.name, own)


def test_a_model_page_links_its_kind_s_styles_and_no_other(client):
    """The graph lab's page links css/labs/graph.css, served from the kind's folder; a page of another kind does not."""
    page = client.get("/models/gcn").get_data(as_text=True)
    href = re.search(r'<link rel="stylesheet" href="(/assets/[^"]+/css/labs/graph\.css)">', page)
    assert href is not None
    answer = client.get(href.group(1))
    assert answer.status_code == 200 and answer.content_type.startswith("text/css")
    assert answer.get_data(as_text=True) == (PROJECT_ROOT / "app/domain/labs/graph/lab.css").read_text()
    assert "css/labs/" not in client.get("/models/lstm").get_data(as_text=True)  # the recurrent kind shares all


def test_the_docs_say_what_each_lab_kind_requires_and_reads():
    """docs/recipes.md has a row per kind naming every part its declaration requires and every key, stage and
    item its page reads, as the kind's module declares them."""
    from app.domain.labs import KINDS

    text = (PROJECT_ROOT / "docs" / "recipes.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    for name, kind in KINDS.items():
        row = rows.get(name)
        assert row is not None, f"docs/recipes.md has no row for the {name} kind"
        named = [n for part in kind.requires.values() for n in part]
        named += [n for reads in kind.reads.values() for n in (*reads.keys, *reads.stages, *reads.items)]
        assert [n for n in named if f"`{n}`" not in row] == [], name


@pytest.mark.parametrize(("edges", "message"), [
    ([[0, 1], [1, 2]], None),
    ([], None),
    ([[0, 0]], "edges[0]: joins 0 to itself; an edge joins two different values"),
    ([[0, 1], [2, 3], [1, 0]], "edges[2]: repeats edges[0] (1 and 0 are joined once)"),
    ([[0, 5]], "edges[0][1]: 5 is out of range 0..4"),
    ([[0, 1, 2]], "edges[0]: must be a pair [a, b] of two integers"),
    ([[0, "1"]], "edges[0][1]: must be an integer, not str"),
    ([[0, 1], [0, 2], [0, 3], [0, 4], [1, 2]], "edges: must hold at most 4 pairs, not 5"),
    ({"0": 1}, "edges: must be a list of pairs [a, b]"),
])
def test_edges_are_pairs_of_two_different_values_none_given_twice(edges, message):
    from app.domain.labs.fields import FieldError, declared_field, parse_query, validate

    field = declared_field("edges", {"type": "edges", "min": 0, "below": "members", "max_length": 4},
                           {"members": 5}, "test")
    if message is None:
        assert validate({"edges": edges}, {"edges": field}) == {"edges": edges}
    else:
        with pytest.raises(FieldError, match=re.escape(message)):
            validate({"edges": edges}, {"edges": field})
    item = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 4}, "minItems": 2, "maxItems": 2}
    assert field.json_schema() == {"type": "array", "items": item, "uniqueItems": True, "maxItems": 4,
                                   "description": "Each pair joins two different values, and no pair is given twice in "
                                                  "either order."}
    with pytest.raises(FieldError, match="a list of edges is sent in a JSON body"):
        parse_query({"edges": ["0,1"]}, {"edges": field})
