"""Static assets under a content-hashed path, cached for a year; a new deploy gets a new path.

`/assets/<version>/js/model-page.js`: the version hashes every file under static/, so the ES modules'
relative imports (`./charts.js`) resolve inside the same version and stay consistent.
"""

import hashlib
import mimetypes
from pathlib import Path

from flask import Blueprint, Flask, Response, abort, current_app, request, url_for
from werkzeug.security import safe_join

bp = Blueprint("assets", __name__)
YEAR = 365 * 24 * 3600


def static_version(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@bp.get("/assets/<version>/<path:filename>")
def asset(version: str, filename: str):
    """A static file; immutable for a year when the version is current, revalidated otherwise."""
    path = safe_join(current_app.static_folder, filename)
    if path is None or not Path(path).is_file():
        abort(404, f"no asset {filename!r}")
    content = Path(path).read_bytes()  # small files, read whole so that they can be compressed
    response = Response(content, mimetype=mimetypes.guess_type(path)[0] or "application/octet-stream")
    response.set_etag(hashlib.sha256(content).hexdigest()[:32])
    if version == current_app.extensions["tensorviz.assets"]:
        response.cache_control.public = True
        response.cache_control.max_age = YEAR
        response.cache_control.immutable = True
    else:
        response.cache_control.no_cache = True
    return response.make_conditional(request)


def asset_url(filename: str) -> str:
    return url_for("assets.asset", version=current_app.extensions["tensorviz.assets"], filename=filename)


def init_app(app: Flask) -> None:
    app.extensions["tensorviz.assets"] = static_version(Path(app.static_folder))
    app.register_blueprint(bp)
    app.add_template_global(asset_url)
