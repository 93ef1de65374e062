"""`tensorviz verify` against a hostile server on loopback, which imitates the API: its recipe code never runs unless
the reader says --trust-server-code (and then it is said first); files come from its origin alone, within a size cap
and one deadline; a malformed answer is refused in a sentence."""

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.services.config import PROJECT_ROOT

from .test_reader_verify import reader

pytestmark = pytest.mark.processes

SLUG = "mlp"


def real_files() -> dict[str, bytes]:
    """The files the MLP's recording names, as this project holds them."""
    manifest = json.loads((PROJECT_ROOT / "manifests" / SLUG / "manifest.json").read_text())
    found = {}
    for name in manifest["files"]:
        path = PROJECT_ROOT / "recipes" / SLUG / name
        if not path.is_file():
            path = PROJECT_ROOT / "manifests" / SLUG / name
        found[name] = path.read_bytes() if path.is_file() else None
    return found


class Hostile:
    """A server that imitates the API for the MLP: the manifest it is given (its files' hashes made to match the
    bodies it serves), each body at /files/<name>, and a drip of `drip` seconds a byte where set."""

    def __init__(self) -> None:
        self.manifest = json.loads((PROJECT_ROOT / "manifests" / SLUG / "manifest.json").read_text())
        self.bodies = {name: body for name, body in real_files().items() if body is not None}
        self.raw: bytes | None = None  # served instead of the manifest, where set
        self.drip = 0.0
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == f"/api/models/{SLUG}":
                    body = hostile.raw if hostile.raw is not None else json.dumps(hostile.served()).encode()
                elif self.path.startswith("/files/") and self.path[7:] in hostile.bodies:
                    body = hostile.bodies[self.path[7:]]
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                for i in range(0, len(body), 1 if hostile.drip else len(body) or 1):
                    self.wfile.write(body[i:i + (1 if hostile.drip else len(body))])
                    self.wfile.flush()
                    time.sleep(hostile.drip)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_port}"

    def served(self) -> dict:
        """The manifest with every file's URL on this server and its hash and size those of the body served."""
        files = {}
        for name, body in self.bodies.items():
            url = self.manifest["files"].get(name, {}).get("url", "")
            files[name] = {"url": url if "://" in url else f"/files/{name}", "sha256": hashlib.sha256(body).hexdigest(),
                           "bytes": len(body)}
        return self.manifest | {"files": files}

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def hostile():
    made = Hostile()
    yield made
    made.close()


def test_the_servers_recipe_code_never_runs_unless_the_reader_trusts_it(hostile, tmp_path):
    marker = tmp_path / "payload-ran"
    payload = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n".encode()
    hostile.bodies["run.py"] = payload + hostile.bodies["run.py"]
    refused = reader(f"{hostile.base}/models/{SLUG}")
    assert refused.returncode == 2 and not marker.exists()
    assert refused.stderr.startswith(f"REFUSED: the server's recipe is not your copy in {PROJECT_ROOT}/recipes/{SLUG}: "
                                     "run.py differs; nothing was run")
    trusted = reader(f"{hostile.base}/models/{SLUG}", "--trust-server-code")
    assert marker.read_text() == "ran"  # the reader asked for it, and was told first
    assert trusted.stderr.startswith("WARNING: --trust-server-code: ") and "run.py" in trusted.stderr
    assert f"come from {hostile.base} and now run on this machine with your privileges" in trusted.stderr
    assert trusted.returncode == 0, trusted.stderr
    assert "the code that ran: the server's (--trust-server-code)" in trusted.stdout


def test_files_only_from_its_origin_only_data_and_names_inside_their_folders(hostile, tmp_path):
    hostile.manifest["files"]["weights.safetensors"]["url"] = "http://127.0.0.2:1/weights.safetensors"
    elsewhere = reader(f"{hostile.base}/models/{SLUG}")
    assert elsewhere.returncode == 2 and "'http://127.0.0.2:1/weights.safetensors' is not on the server checked" \
        in elsewhere.stderr
    hostile.manifest["files"]["weights.safetensors"]["url"] = "file:///etc/hostname"
    local = reader(f"{hostile.base}/models/{SLUG}")
    assert local.returncode == 2 and "'file:///etc/hostname' is not on the server checked" in local.stderr
    del hostile.manifest["files"]["weights.safetensors"]
    hostile.bodies["weights.bin"] = hostile.bodies.pop("weights.safetensors")  # a pickle is never read
    pickled = reader(f"{hostile.base}/models/{SLUG}")
    assert pickled.returncode == 2 and "weights.bin: neither the recipe's code nor data this verifier reads" \
        in pickled.stderr
    hostile.bodies["weights.safetensors"] = hostile.bodies.pop("weights.bin")
    hostile.manifest["provenance"]["checkpoint"] = {"files": {"../../../etc/hostname": "0" * 64}}
    climbing = reader(f"{hostile.base}/models/{SLUG}", "--checkpoint", str(tmp_path))
    assert climbing.returncode == 2
    assert "'../../../etc/hostname': the manifest names a checkpoint file outside its folder" in climbing.stderr


def test_a_size_cap_one_deadline_and_a_sentence_for_any_malformed_answer(hostile):
    capped = reader(f"{hostile.base}/models/{SLUG}", "--max-bytes", "1000")
    assert capped.returncode == 2 and "more than the 1,000 allowed (--max-bytes)" in capped.stderr
    hostile.manifest["provenance"]["execution"]["seed"] = "seven"
    malformed = reader(f"{hostile.base}/models/{SLUG}")
    assert malformed.returncode == 2 and malformed.stderr.startswith(
        f"REFUSED: the server's manifest of {SLUG} is malformed: provenance.execution.seed: must be ")
    assert "Traceback" not in malformed.stderr
    hostile.raw = b"[" * 200_000 + b"]" * 200_000
    nested = reader(f"{hostile.base}/models/{SLUG}")
    assert nested.returncode == 2 and "did not answer readable JSON" in nested.stderr
    hostile.raw, hostile.drip = b'{"slug": "mlp"}' * 20, 0.2  # a byte every 0.2 s: 60 s of bytes
    started = time.monotonic()
    dripped = reader(f"{hostile.base}/models/{SLUG}", "--timeout", "3")
    assert dripped.returncode == 2 and "ran past its deadline (--timeout)" in dripped.stderr
    assert time.monotonic() - started < 20
