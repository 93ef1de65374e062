"""The baseline for bench/load.py: a bare Flask app answering TensorViz's own bytes, nothing else."""

import os
from pathlib import Path

from flask import Flask, Response

BYTES = Path(os.environ["BENCH_BYTES_DIR"])


def _read(name: str) -> tuple[bytes, str]:
    """The bytes as TensorViz sent them (compressed) and their Content-Encoding, read once."""
    return (BYTES / name).read_bytes(), (BYTES / f"{name}.encoding").read_text()


MANIFEST, PAGE, REPORT = (_read(name) for name in ("manifest.json", "page.html", "report.json"))
app = Flask(__name__)


def _answer(body: tuple[bytes, str], mimetype: str) -> Response:
    response = Response(body[0], mimetype=mimetype)
    if body[1]:
        response.headers["Content-Encoding"] = body[1]
    return response


@app.get("/api/models/bert")
def manifest():
    """The manifest's bytes."""
    return _answer(MANIFEST, "application/json")


@app.get("/models/bert")
def page():
    """The model page's bytes."""
    return _answer(PAGE, "text/html")


@app.post("/api/models/bert/verifications")
def report():
    """The cached report's bytes."""
    return _answer(REPORT, "application/json")
