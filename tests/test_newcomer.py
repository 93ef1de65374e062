"""What a newcomer does: the README's first command, `make serve`, on a virtual environment of its own (the set-up a
reader gets, not the tests' extras), then every model page, every verification and both DataLabs."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from app.services.config import PROJECT_ROOT

from .conftest import eventually

pytestmark = pytest.mark.processes

READY_SECONDS = 600  # a fresh environment: pip installs PyTorch and the rest (from its cache where it has one)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(url: str, body: dict | None = None) -> tuple[int, dict | str, dict]:
    """The status, the answer (JSON where it is) and the headers of a GET, or of a POST of `body` as JSON."""
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            status, raw, headers = answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    try:
        return status, json.loads(raw), headers
    except ValueError:
        return status, raw.decode(errors="replace"), headers


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`make serve` with a virtual environment of its own (VENV), the state in a folder of the test's."""
    root = tmp_path_factory.mktemp("newcomer")
    port = free_port()
    env = os.environ | {"TENSORVIZ_STATE_PATH": str(root / "state.sqlite")}
    env = {k: v for k, v in env.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST"))}
    log = open(root / "serve.log", "w")
    started = time.monotonic()
    process = subprocess.Popen(["make", "--no-print-directory", "serve", f"VENV={root / 'venv'}", f"PORT={port}"],
                               cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        while time.monotonic() - started < READY_SECONDS:
            if process.poll() is not None:
                pytest.fail(f"make serve ended ({process.returncode}): {(root / 'serve.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail(f"no first page in {READY_SECONDS} s: {(root / 'serve.log').read_text()[-3000:]}")
        yield base, root / "venv"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


def test_the_readers_environment_has_no_test_tools_and_every_recipe_folder_is_a_served_model(served):
    base, venv = served
    assert not (venv / "bin" / "pytest").exists()  # the reader's set-up, not the tests'
    status, catalog, _ = ask(f"{base}/api/models")
    assert status == 200 and catalog["unavailable"] == []
    folders = sorted(p.name for p in (PROJECT_ROOT / "recipes").iterdir() if (p / "recipe.toml").is_file())
    assert sorted(m["slug"] for m in catalog["models"]) == folders
    for slug in folders:
        status, page, _ = ask(f"{base}/models/{slug}")
        assert status == 200, (slug, page[:300])


def test_every_recorded_case_verifies(served):
    base, _ = served
    _, catalog, _ = ask(f"{base}/api/models")
    for slug in (m["slug"] for m in catalog["models"]):
        status, manifest, _ = ask(f"{base}/api/models/{slug}")
        if not manifest["experiment"]["cases"]:
            continue
        status, answer, headers = ask(f"{base}/api/models/{slug}/verifications", {})
        if status == 202:
            status, answer, _ = eventually(lambda headers=headers: ask(base + headers["Location"]),
                                           lambda asked: asked[1]["state"] == "done", seconds=600, every=0.5)
            answer = answer["report"]
        assert status == 200 and answer.get("status") == "passed", (slug, str(answer)[:500])


def test_both_datalabs_answer_on_the_checkpoints_a_fresh_machine_gets(served):
    base, _ = served
    status, traced, _ = ask(f"{base}/api/models/bert-base/datalab", {"text": "The capital of France is Paris."})
    assert status == 200, traced
    assert traced["checkpoint_recognised"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert traced["checkpoint"]["probe"]["looks_untrained"] is False
    status, traced, _ = ask(f"{base}/api/models/gpt2/trace", {"prompt": "3 1 4 1 ="})
    assert status == 200 and traced["prediction"]["text"] == "1", traced
    status, generated, _ = ask(f"{base}/api/models/gpt2/generations", {"prompt": "3 1 4 1 =", "steps": 3})
    assert status == 200 and generated["text"] == "3 1 4 1 = 1 1 3", generated
    status, patched, _ = ask(f"{base}/api/models/gpt2/patching", {"prompt": "3 1 4 1 =", "corrupted": "3 5 4 6 ="})
    assert status == 200, patched
