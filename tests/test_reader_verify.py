"""`tensorviz verify` against a running server, in processes that import no Flask: a model passes; a file the
server changed is refused by name before anything runs; a recorded number changed fails naming its case and item;
`--retrain` trains the recipe here and compares the weights; an address that is no model page is refused."""

import json
import subprocess
import sys
import threading

import pytest
from werkzeug.serving import make_server

from app.services.config import PROJECT_ROOT, TestConfig

pytestmark = pytest.mark.processes

# The verifier as a reader runs it, in a process that must end without having imported Flask.
READER = """import sys
from tensorviz.verify import main
code = main(sys.argv[1:])
assert not [m for m in sys.modules if m == "flask" or m.startswith(("flask.", "werkzeug"))], "Flask was imported"
sys.exit(code)
"""


def reader(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", READER, "verify", *args], capture_output=True, text=True,
                          timeout=300, cwd="/")  # not the project's folder: only the installed package


@pytest.fixture
def serve(make_app):
    """Serve an app (TestConfig with `settings`) on a loopback port: its base URL."""
    running = []

    def start(**settings) -> str:
        app = make_app(type("Served", (TestConfig,), settings))
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        running.append((server, app))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, _ in running:
        server.shutdown()


def test_a_model_the_server_serves_passes_here(serve):
    base = serve()
    done = reader(f"{base}/models/lenet?case=zero", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "passed" and report["model"] == "lenet"
    assert report["summary"]["values_failed"] == 0 and report["summary"]["values"] > 200
    recorded = json.loads((PROJECT_ROOT / "manifests" / "lenet" / "manifest.json").read_text())["files"]
    assert {f["name"]: f["sha256"] for f in report["files"]} == {n: r["sha256"] for n, r in recorded.items()}
    assert report["environment"]["seed"] == 0 and report["environment"]["deterministic"] is True
    told = reader(f"{base}/api/models/lenet")  # the API's URL, and the report as a reader reads it
    assert told.returncode == 0 and told.stdout.splitlines()[-1].startswith("PASSED: 213 of 213 recorded values")


def test_a_file_the_server_changed_is_refused_by_name(tree, serve):
    _, recipe = tree.copy("lenet")
    with (recipe / "run.py").open("a") as run_py:
        run_py.write("\n# changed on the server\n")
    done = reader(f"{serve(**tree.config())}/models/lenet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("REFUSED: the server sent 1 file whose sha256 is not the manifest's: run.py (sha256 ")
    assert done.stderr.rstrip().endswith("; refused, nothing was run")


def test_a_recorded_number_changed_fails_naming_its_case_and_item(tree, serve):
    manifest_file, _ = tree.copy("lenet")
    manifest = json.loads(manifest_file.read_text())
    case = manifest["experiment"]["cases"][1]
    metric = case["metrics"][-1]
    metric["value"] = metric["value"] * 1.5 + 1
    manifest_file.write_text(json.dumps(manifest))
    done = reader(f"{serve(**tree.config())}/models/lenet")
    assert done.returncode == 1, done.stderr
    assert f"    FAILED {case['id']} / {metric['key']} ({metric['label']}): max |diff|" in done.stdout
    assert [line for line in done.stdout.splitlines() if "FAILED " in line and "/" in line] == \
        [line for line in done.stdout.splitlines() if line.startswith(f"    FAILED {case['id']} / {metric['key']}")]
    assert done.stdout.splitlines()[-1].startswith("FAILED: ")


def test_retrain_trains_the_recipe_here_and_compares_its_weights(serve):
    base = serve()
    done = reader(f"{base}/models/gcn", "--retrain", "--json")
    assert done.returncode == 0, done.stderr
    trained = json.loads(done.stdout)["retraining"]
    assert trained["passed"] and {t["name"] for t in trained["tensors"]} == {"conv1.linear.weight",
                                                                               "conv2.linear.weight"}
    refused = reader(f"{base}/models/bert-base", "--retrain")  # said before anything is fetched or run
    assert refused.returncode == 2
    assert refused.stderr == "REFUSED: bert-base is not trained by its recipe (its manifest records no train.py)\n"


def test_the_seed_bert_is_refused_as_its_served_recipe_is_not_the_recorded_capture(serve):
    """The seed manifest is the original capture, byte for byte; this project rebuilt its recipe (model.py, run.py),
    and the server's own verification says so: a reader who trusts only the manifest's hashes cannot run it."""
    done = reader(f"{serve()}/models/bert")
    assert done.returncode == 2
    for name in ("graph.tensorviz.json", "model.py", "run.py", "requirements.txt", "preview.svg"):
        assert f"{name} (sha256 " in done.stderr


def test_what_is_no_model_page_or_no_model_is_refused(serve):
    base = serve()
    assert reader("ftp://example.org/models/lenet").stderr.startswith("REFUSED: 'ftp://example.org/models/lenet' is")
    missing = reader(f"{base}/models/nope", "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout) == {
        "status": "refused", "message": f"{base}/api/models/nope answered 404: no model 'nope'"}
    checkpoint = reader(f"{base}/models/bert-base")
    assert checkpoint.returncode == 2 and "give its folder with --checkpoint" in checkpoint.stderr
