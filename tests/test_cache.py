"""Answers kept through Flask-Caching: the shared store as its default backend (bounds and all), and any of
Flask-Caching's own backends named by CACHE_TYPE."""

import pytest

from app.services.cache import SharedStoreCache, cache
from app.services.config import TestConfig
from app.services.parts import parts

from .conftest import eventually

RUN = {"input_ids": [1, 4, 3, 2, 6, 2], "segment_ids": [0, 0, 0, 0, 1, 1], "mlm_positions": [2],
       "original_ids": [1, 4, 5, 2, 6, 2], "nsp_label": 0, "attention": "bidirectional"}


def app_with(make_app, **settings):
    return make_app(type("Cached", (TestConfig,), settings))


def test_the_default_backend_is_the_shared_store_and_keeps_its_bounds(make_app, tmp_path):
    path = str(tmp_path / "state.sqlite3")
    # two processes of one host
    first, second = app_with(make_app, STATE_PATH=path), app_with(make_app, STATE_PATH=path)
    with first.app_context():
        assert isinstance(cache.cache, SharedStoreCache)
    assert first.test_client().post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False
    assert second.test_client().post("/api/models/bert/runs", json=RUN).get_json()["cached"] is True
    small = app_with(make_app, STATE_PATH=str(tmp_path / "small.sqlite3"), STATE_MAX_ENTRY_BYTES=1000)
    client = small.test_client()
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False  # too large to keep


def verified(client) -> dict:
    """A verification of GPT to its report, polling its job (within eventually()'s bound)."""
    answer = client.post("/api/models/gpt/verifications")
    assert answer.status_code in (200, 202), answer.get_json()
    if answer.status_code == 200:
        return answer.get_json()
    return eventually(lambda: client.get(answer.headers["Location"]).get_json(),
                      lambda job: job["state"] == "done", seconds=120)["report"]


@pytest.mark.parametrize("backend", ["SimpleCache", "NullCache"])
def test_a_flask_caching_backend_named_by_cache_type_keeps_the_answers(make_app, backend):
    app = app_with(make_app, CACHE_TYPE=backend, CACHE_NO_NULL_WARNING=True)
    client = app.test_client()
    with app.app_context():
        assert type(cache.cache).__name__ == backend
    kept = backend != "NullCache"
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is False
    assert client.post("/api/models/bert/runs", json=RUN).get_json()["cached"] is kept
    assert verified(client)["status"] == "passed"
    again = client.post("/api/models/gpt/verifications")
    if kept:  # the report is kept: answered at once, from the cache
        assert again.status_code == 200 and again.get_json()["cached"] is True
    else:
        assert again.status_code == 202  # nothing kept: a new run
        verified(client)
    assert client.get("/api/models/gpt/verifications/latest").status_code == (200 if kept else 404)


def test_a_rendered_page_is_shared_by_the_hosts_processes_under_a_key_naming_its_content(make_app, tmp_path,
                                                                                        monkeypatch):
    from app.web import pages

    path = str(tmp_path / "state.sqlite3")
    first, second = app_with(make_app, STATE_PATH=path), app_with(make_app, STATE_PATH=path)
    page = first.test_client().get("/models/gpt?case=repeats")
    assert page.status_code == 200
    rendered = []
    real = pages.render_model_page
    monkeypatch.setattr(pages, "render_model_page", lambda *a, **k: rendered.append(a) or real(*a, **k))
    again = second.test_client().get("/models/gpt?case=repeats")  # another process: from the shared cache
    assert again.data == page.data and rendered == []
    third = app_with(make_app, STATE_PATH=path)
    parts(third).pages = "another release"  # other templates or code: never the old page
    assert third.test_client().get("/models/gpt?case=repeats").status_code == 200 and len(rendered) == 1
