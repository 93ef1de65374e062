"""The downloadable files of each model, at the URLs its manifest records."""

import re
from urllib.parse import quote

from flask import Blueprint, Response, abort

from ..build.variants import model_or_404

bp = Blueprint("downloads", __name__)


def content_disposition(kind: str, filename: str) -> str:
    """An RFC 6266 header: a plain ASCII `filename` for old clients, the exact name in `filename*`."""
    fallback = re.sub(r'[^A-Za-z0-9._ -]', "_", filename).strip() or "download"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


@bp.get("/models/<model:slug>/<revision:revision>/<name>")
def model_file(slug: str, revision: str, name: str):
    """One file of a model's current revision; anything not in its file list is a 404."""
    model = model_or_404(slug)
    if revision != model.revision:
        abort(404, f"revision {revision!r} of {slug!r} is not served; the current one is {model.revision}")
    served = model.files.get(name)
    if served is None:
        abort(404, f"{slug!r} has no file {name!r}")
    response = Response(served.content, content_type=served.content_type)
    response.set_etag(served.sha256)
    response.headers["Content-Disposition"] = content_disposition("inline", name)
    return response
