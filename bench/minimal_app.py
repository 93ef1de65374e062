"""The baseline for bench/load.py: a bare Flask app answering the same bytes as TensorViz, nothing else."""

import os
from pathlib import Path

from flask import Flask, Response

BYTES = Path(os.environ["BENCH_BYTES_DIR"])
# Read once, as TensorViz holds its manifests in memory.
MANIFEST, PAGE, REPORT = ((BYTES / name).read_bytes() for name in ("manifest.json", "page.html", "report.json"))
app = Flask(__name__)


@app.get("/api/models/bert")
def manifest():
    """The manifest's bytes."""
    return Response(MANIFEST, mimetype="application/json")


@app.get("/models/bert")
def page():
    """The model page's bytes."""
    return Response(PAGE, mimetype="text/html")


@app.post("/api/models/bert/verifications")
def report():
    """The cached report's bytes."""
    return Response(REPORT, mimetype="application/json")
