"""Each model's verification history: the server's reports and those a reader's verifier shares, kept apart,
bounded, named by their environment, with the drift between environments; and `flask verify --all`, a
deployment's check of the whole catalog."""

import json
import time
import urllib.request

import pytest

from app.domain.history import ENVIRONMENT_KEYS, summarized

from .test_reader_verify import reader, serve  # noqa: F401 - serve is a fixture


def test_the_servers_verifications_are_kept_bounded_and_name_their_environment(tree, tree_app):
    tree.copy("mlp")
    app = tree_app(HISTORY_LIMIT=3)
    for _ in range(4):
        assert app.test_cli_runner().invoke(args=["verify", "mlp"]).exit_code == 0
    history = app.test_client().get("/api/models/mlp/verifications/history").get_json()
    assert history["limit"] == 3 and len(history["entries"]) == 3
    entry = history["entries"][0]
    assert (entry["kind"], entry["reported_by"], entry["status"]) == ("verification", "server", "passed")
    assert set(entry["environment"]) == set(ENVIRONMENT_KEYS) and entry["environment"]["cpu"]
    assert entry["revision"] == json.loads((tree.manifests / "mlp" / "manifest.json").read_text())["revision"]
    assert len(history["environments"]) == 1  # four replays on one machine: one environment
    env = history["environments"][0]
    assert (env["reports"], env["failed"], env["reported_by"]) == (3, 0, "server")
    assert env["largest_deviation"]["verification"] == max(e["largest_deviation"] for e in history["entries"])
    assert history["drift"] == []  # one environment: nothing to drift from


def test_a_readers_shared_report_is_kept_apart_and_its_replay_matches_the_servers_bytes(serve):  # noqa: F811
    base = serve()
    assert reader(f"{base}/models/mlp", "--share").returncode == 0  # the reader's, first
    start = urllib.request.Request(f"{base}/api/models/mlp/verifications", method="POST")
    with urllib.request.urlopen(start) as started:  # then the server's
        assert started.status in (200, 202)
    for _ in range(200):
        with urllib.request.urlopen(f"{base}/api/models/mlp/verifications/history") as answer:
            history = json.loads(answer.read())
        if {e["reported_by"] for e in history["entries"]} == {"client", "server"}:
            break
        time.sleep(0.1)
    by = {env["reported_by"]: env for env in history["environments"]}
    assert set(by) == {"client", "server"}  # the same machine, kept apart by who reported
    assert by["client"]["id"] == by["server"]["id"]
    # The reader's digest is the server's (the same bytes), but it is their claim: no drift is computed from it.
    digests = {e["reported_by"]: e["digest"] for e in history["entries"]}
    assert digests["client"] == digests["server"] and history["drift"] == []


GOOD = {"kind": "verification", "status": "passed", "revision": "abc", "values": 3, "values_failed": 0,
        "largest_deviation": 0.0, "digest": None,
        "environment": {"python": "3.12.1", "torch": "2.5.0", "numpy": "2.1.0", "os": "Darwin 24.1", "cpu": "Apple M3",
                        "vector_extensions": ["asimd"], "cpu_capability": "DEFAULT", "torch_threads": 8,
                        "device": "cpu"}}


def test_a_shared_report_is_checked_before_it_is_kept(client):
    good = GOOD
    kept = client.post("/api/models/mlp/verifications/history", json=good)
    assert kept.status_code == 201 and kept.get_json()["reported_by"] == "client"
    for bad, field in (({**good, "reported_by": "server"}, "reported_by"), ({**good, "values": -1}, "values"),
                       ({**good, "values_failed": 4}, "values_failed"), ({**good, "status": "error"}, "status"),
                       ({**good, "environment": {**good["environment"], "cpu": 3}}, "environment.cpu")):
        refused = client.post("/api/models/mlp/verifications/history", json=bad)
        assert refused.status_code == 400 and refused.get_json()["error"]["message"].startswith(f"{field}:"), bad
    # Out of range, or no number at all: refused in words, never kept, never a 500.
    for body in (json.dumps({**good, "largest_deviation": -1e308}), json.dumps({**good, "values": 10**30}),
                 json.dumps(good).replace('"largest_deviation": 0.0', '"largest_deviation": NaN'),
                 json.dumps(good).replace('"largest_deviation": 0.0', '"largest_deviation": Infinity'),
                 json.dumps({**good, "digest": "0" * 63}), json.dumps({**good, "revision": "r" * 65})):
        refused = client.post("/api/models/mlp/verifications/history", data=body, content_type="application/json")
        assert refused.status_code == 400, (body[:80], refused.get_json())
    history = client.get("/api/models/mlp/verifications/history").get_json()
    assert [e["environment"]["cpu"] for e in history["entries"]] == ["Apple M3"]
    for _ in range(5):  # one client's posts fold into its latest three: the server's entries stay
        client.post("/api/models/mlp/verifications/history", json=good)
    assert client.application.test_cli_runner().invoke(args=["verify", "mlp"]).exit_code == 0
    for _ in range(5):
        client.post("/api/models/mlp/verifications/history", json=good)
    kept = [e["reported_by"] for e in client.get("/api/models/mlp/verifications/history").get_json()["entries"]]
    assert kept == ["client", "client", "client", "server"]  # newest first
    assert client.post("/api/models/mlp/verifications/history", json=good,
                       headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post("/api/models/nope/verifications/history", json=good).status_code == 404


def test_no_number_of_addresses_displaces_the_reports_readers_shared_before_them(tree, tree_app):
    """Fifty-one addresses each posting a fake "failed" report keep the genuine reader's report and the server's:
    the readers are listed first come, the last place taken in turn by each newcomer."""
    tree.copy("mlp")
    client = tree_app(HISTORY_LIMIT=5).test_client()
    genuine = client.post("/api/models/mlp/verifications/history", json=GOOD,
                          environ_base={"REMOTE_ADDR": "198.51.100.7"})
    assert genuine.status_code == 201
    assert client.application.test_cli_runner().invoke(args=["verify", "mlp"]).exit_code == 0
    fake = {**GOOD, "status": "failed", "values_failed": 3,
            "environment": {**GOOD["environment"], "cpu": "a forged processor"}}
    for n in range(51):
        posted = client.post("/api/models/mlp/verifications/history", json=fake,
                             environ_base={"REMOTE_ADDR": f"203.0.113.{n + 1}"})
        assert posted.status_code == 201
    entries = client.get("/api/models/mlp/verifications/history").get_json()["entries"]
    cpus = [(e["reported_by"], e["environment"]["cpu"]) for e in entries]
    assert ("client", "Apple M3") in cpus and any(by == "server" for by, _ in cpus)
    assert sum(by == "client" for by, _ in cpus) == 5  # HISTORY_LIMIT readers, each with its latest


def test_drift_is_none_for_the_same_bytes_and_bounded_by_both_deviations_otherwise():
    def entry(reported_by, env_id, digest, deviation, revision="r"):
        return {"kind": "verification", "reported_by": reported_by, "environment_id": env_id, "digest": digest,
                "largest_deviation": deviation, "status": "passed", "revision": revision, "at": "t",
                "environment": {}}

    found = summarized([entry("server", "a", "x", 1e-7), entry("server", "b", "x", 1e-7),
                        entry("server", "c", "y", 3e-6), entry("server", "d", "z", 1.0, revision="old"),
                        entry("client", "e", "x", 0.0)], "r")
    drift = {(d["a"], d["b"]): (d["identical"], d["at_most"]) for d in found["drift"]}
    assert drift == {("a", "b"): (True, 0.0), ("a", "c"): (False, pytest.approx(3.1e-6)),
                     ("b", "c"): (False, pytest.approx(3.1e-6))}  # another revision's entry drifts from nothing
    assert {e["id"]: e["largest_deviation"] for e in found["environments"]}["d"] == {}
    # A reader's entry is listed (their claim) and drifts from nothing, whatever digest it claims.
    assert "e" in {env["id"] for env in found["environments"]}


def test_verify_all_checks_the_whole_catalog_and_fails_naming_the_model_that_does_not_hold(tree, tree_app):
    tree.copy("mlp")
    tree.copy("gcn")
    passed = tree_app().test_cli_runner().invoke(args=["verify", "--all"])
    assert passed.exit_code == 0, passed.output
    assert passed.output.splitlines()[-1] == "2 of 2 models passed"
    manifest_file = tree.manifests / "gcn" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["experiment"]["cases"][0]["metrics"][0]["value"] += 1
    manifest_file.write_text(json.dumps(manifest))
    failed = tree_app().test_cli_runner().invoke(args=["verify", "--all"])
    assert failed.exit_code == 1
    assert "gcn: failed" in failed.output and failed.output.splitlines()[-1] == "1 of 2 models passed; not: gcn"
    usage = tree_app().test_cli_runner().invoke(args=["verify"])
    assert usage.exit_code == 2 and "give one SLUG, or --all" in usage.output
