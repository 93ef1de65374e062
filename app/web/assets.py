"""Static assets under a content-hashed path, cached for a year; a new deploy gets a new path.

`/assets/<version>/js/model-page.js`: the version hashes every file under static/ and each lab kind's ES
module and stylesheet (served as `js/labs/<kind>.js` and `css/labs/<kind>.css` from the kind's folder), so the ES
modules' relative imports (`./common.js`, `../charts.js`) resolve inside the same version and stay consistent.
"""

import hashlib
import mimetypes
from pathlib import Path

from flask import Blueprint, Flask, Response, abort, current_app, url_for
from werkzeug.security import safe_join

from ..domain.labs import kind_files
from ..services.parts import parts

bp = Blueprint("assets", __name__)
YEAR = 365 * 24 * 3600


def kind_assets() -> dict[str, Path]:
    """The lab kinds' ES modules and stylesheets by the name each is served under (their templates are not
    assets)."""
    return {name: path for name, path in kind_files().items() if not name.endswith(".html")}


def served_files(folder: Path) -> dict[str, Path]:
    """Every asset by the name it is served under: static/'s files and the lab kinds' own."""
    return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()} | kind_assets()


def static_version(folder: Path) -> str:
    return version_of(served_files(folder))


def version_of(files: dict[str, Path]) -> str:
    """One hash over the files' names and bytes."""
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def page_version(app: Flask) -> str:
    """What a rendered page depends on besides its model and request: the templates, the lab kinds' templates
    and the app's code (a page kept in the shared cache by one release is never served by another)."""
    code = Path(__file__).resolve().parents[1]
    files = {f"app/{p.relative_to(code).as_posix()}": p for p in code.rglob("*") if p.suffix in (".py", ".html")}
    templates = Path(app.root_path, app.template_folder)
    files |= {f"templates/{p.relative_to(templates).as_posix()}": p for p in templates.rglob("*") if p.is_file()}
    return version_of(files) + parts(app).assets


@bp.get("/assets/<version>/<path:filename>")
def asset(version: str, filename: str):
    """A static file; immutable for a year when the version is current, revalidated otherwise."""
    path = kind_assets().get(filename) or safe_join(current_app.static_folder, filename)
    if path is None or not Path(path).is_file():
        abort(404, f"no asset {filename!r}")
    content = Path(path).read_bytes()  # small files, read whole so that they can be compressed
    response = Response(content, mimetype=mimetypes.guess_type(path)[0] or "application/octet-stream")
    response.set_etag(hashlib.sha256(content).hexdigest()[:32])
    if version == parts().assets:
        response.cache_control.public = True
        response.cache_control.max_age = YEAR
        response.cache_control.immutable = True
    else:
        response.cache_control.no_cache = True
    return response


def asset_url(filename: str) -> str:
    return url_for("assets.asset", version=parts().assets, filename=filename)


def init_app(app: Flask) -> None:
    parts(app).assets = static_version(Path(app.static_folder))
    parts(app).pages = page_version(app)
    app.register_blueprint(bp)
    app.add_template_global(asset_url)
