"""A model's verification history: each verification and retraining report kept as one entry named by the
environment it ran in, and what a reader is shown of them: the environments seen, the largest deviation from the
recording in each, and the drift between them.

The server writes its own reports' entries; a reader's `tensorviz verify --share` posts one made by the same rules
(verification_entry), which the server keeps apart as reported by a client: a claim, listed as one, never counted in
the drift between environments. Two environments whose replays
produced the same bytes (the digest of the replayed values, or of the retrained weights) drifted by nothing; two
that did not differ by at most the sum of their deviations from the recording, each bounded by the tolerance.
"""

import hashlib
import json
from itertools import combinations

# What names an environment: what decides how its sums round (the software, the processor, the kernel family it was
# told to use and the kernels torch chose).
ENVIRONMENT_KEYS = ("python", "torch", "numpy", "os", "cpu", "vector_extensions", "kernels", "cpu_capability",
                    "torch_threads", "device")
OPTIONAL_KEYS = ("kernels",)  # not named by reports made before it was: those keep their names


def _named(environment: dict) -> dict:
    return {key: environment.get(key) for key in ENVIRONMENT_KEYS if key in environment or key not in OPTIONAL_KEYS}


def environment_id(environment: dict) -> str:
    """A short, stable name for an environment: the digest of what names it."""
    return hashlib.sha256(json.dumps(_named(environment), sort_keys=True).encode()).hexdigest()[:12]


def verification_entry(report: dict, reported_by: str) -> dict:
    """A verification report (the server's, or one a reader's verifier made) as a history entry."""
    deviations = [v["max_abs_diff"] for case in report["cases"] for v in case["values"]
                  if isinstance(v.get("max_abs_diff"), int | float)]
    summary = report["summary"]
    return {"kind": "verification", "reported_by": reported_by, "status": report["status"],
            "revision": report.get("revision"), "environment": _named(report["environment"]),
            "environment_id": environment_id(report["environment"]),
            "largest_deviation": max(deviations, default=None), "values": summary["values"],
            "values_failed": summary["values_failed"] + summary["checks_failed"],
            "digest": report.get("replay_sha256")}


def retraining_entry(report: dict, revision: str, reported_by: str) -> dict:
    """A retraining report as a history entry: its deviation is the largest weight difference."""
    tensors = report["tensors"]
    bound = report.get("bound", report["tolerance"])  # the weights' bound that applied: see recipekit.training
    off = sum(t["largest_difference"] is None or t["largest_difference"] > bound for t in tensors)
    return {"kind": "retraining", "reported_by": reported_by, "status": report["status"], "revision": revision,
            "environment": _named(report["environment"]), "environment_id": environment_id(report["environment"]),
            "largest_deviation": report["largest_difference"], "values": len(tensors), "values_failed": off,
            "digest": report.get("weights_sha256")}


def summarized(entries: list[dict], revision: str) -> dict:
    """The environments seen (the server's apart from the readers'), each with its reports and its largest
    deviation from the recording by kind, and the drift between every two that ran the same kind on this
    revision: none where their latest replays produced the same bytes, else at most the sum of their deviations."""
    environments: dict[tuple[str, str], dict] = {}
    for entry in entries:
        found = environments.setdefault((entry["reported_by"], entry["environment_id"]), {
            "id": entry["environment_id"], "reported_by": entry["reported_by"], "environment": entry["environment"],
            "reports": 0, "failed": 0, "last_at": None, "largest_deviation": {}, "latest": {}})
        found["reports"] += 1
        found["failed"] += entry["status"] != "passed"
        found["last_at"] = entry["at"]
        if entry["revision"] == revision:
            kind = entry["kind"]
            if entry["largest_deviation"] is not None:
                found["largest_deviation"][kind] = max(found["largest_deviation"].get(kind, 0.0),
                                                       entry["largest_deviation"])
            found["latest"][kind] = entry
    drift = []
    # Only between the server's own environments: a reader's digest and deviation are what they posted, which the
    # server cannot check, so a reader's entry is shown as their claim and never called identical to the server's.
    for a, b in combinations([env for env in environments.values() if env["reported_by"] == "server"], 2):
        for kind in sorted(set(a["latest"]) & set(b["latest"])):
            first, second = a["latest"][kind], b["latest"][kind]
            same = first["digest"] is not None and first["digest"] == second["digest"]
            bound = None if same or None in (first["largest_deviation"], second["largest_deviation"]) else \
                first["largest_deviation"] + second["largest_deviation"]
            drift.append({"kind": kind, "a": a["id"], "a_reported_by": a["reported_by"], "b": b["id"],
                          "b_reported_by": b["reported_by"], "identical": same, "at_most": 0.0 if same else bound})
    shown = [{k: v for k, v in env.items() if k != "latest"} for env in environments.values()]
    return {"revision": revision, "environments": shown, "drift": drift, "entries": list(reversed(entries))}
