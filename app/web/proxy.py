"""The reverse proxy's configuration, made from the app's own settings and headers (`flask --app wsgi
proxy-config`, run by scripts/serve-production): deploy/nginx.conf.in with its @NAMES@ filled in."""

import grp
import json
import os
import pwd
from pathlib import Path

import click
from flask import Flask, current_app, render_template
from werkzeug.http import HTTP_STATUS_CODES

from ..services.config import PROJECT_ROOT
from .errors import error_body
from .response_cache import proxy_bypass
from .security import HEADERS

TEMPLATE = PROJECT_ROOT / "deploy" / "nginx.conf.in"
# What nginx answers itself: a malformed request, a client too slow, a body or a URI or headers too large (494:
# nginx's own code for the last, sent as 400), the web tier out of reach or too slow.
REFUSALS = {400: "the request is malformed", 405: "this method is not answered here (TRACE and CONNECT never are)",
            408: "the request was not sent in time",
            412: "If-Match names no current representation of this resource; GET it again for its ETag",
            413: "request body over {max_body} bytes", 414: "the URI is too long",
            494: "the request headers are too large", 502: "the web tier cannot be reached; try again shortly",
            504: "the web tier did not answer in time"}
# The methods the app answers on some path, which a 405 nginx makes itself names (the app's own 405s name a path's).
ALLOW = "GET, HEAD, POST, OPTIONS"


def _quoted(text: str) -> str:
    """A string as nginx reads it in `return`: quoted, and no `$` left to be read as a variable."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("$", "&#36;") + "'"


def _refusal(status: int, message: str, as_json: bool) -> str:
    """What nginx answers for a request it refuses itself: the API's error shape, or the site's error page."""
    shown = 400 if status == 494 else status
    name = HTTP_STATUS_CODES[shown]
    if as_json:
        body, kind = json.dumps(error_body(shown, name, message)), "application/json"
    else:
        with current_app.test_request_context("/"):
            body, kind = render_template("error.html", status=shown, name=name, message=message), "text/html"
    # A URI, not a named location: nginx cannot send a request whose request line it could not read to a named one.
    where = "api" if as_json else "page"
    # An add_header here would drop the server's: a 405's Allow comes with the security headers again.
    allow = "".join(f"            add_header {name} {_quoted(value)} always;\n"
                    for name, value in [*HEADERS, ("Allow", ALLOW)]) if status == 405 else ""
    return (f"        location = /.refused/{where}/{status} {{\n"
            f"            internal;\n"
            f"            default_type {kind};\n"
            f"{allow}"
            f"            return {shown} {_quoted(body)};\n"
            f"        }}")


def _as_root(run_dir: str) -> str:
    """Lines for an nginx started as root, as a service usually is: its workers run as the run folder's owner (as
    `nobody`, its default, they could not write the kept answers under a private home), and ahead of every other
    process (`worker_priority`), so that a kept answer is served at once however busy the web tier is. Started
    as anyone else, nginx can do neither and takes no such line."""
    if os.geteuid() != 0:
        return ""
    owner = os.stat(run_dir)
    return (f"user {pwd.getpwuid(owner.st_uid).pw_name} {grp.getgrgid(owner.st_gid).gr_name};\n"
            "worker_priority -5;\n")


def nginx_config(listen: str, upstream: str, run_dir: str) -> str:
    """The proxy's configuration for this app: where it listens, where the web tier is, where nginx keeps its
    files, and the app's body limit, recipe timeout, security headers and error answers."""
    config = current_app.config
    max_body = config["MAX_CONTENT_LENGTH"]
    headers = "\n".join(f"        add_header {name} {_quoted(value)} always;" for name, value in HEADERS)
    hide = "\n".join(f"            proxy_hide_header {name};" for name, _ in HEADERS)
    errors = []
    for status, message in REFUSALS.items():
        errors.append(f"        error_page {status} /.refused/$refused_as/{status};")
        errors += [_refusal(status, message.format(max_body=max_body), as_json) for as_json in (True, False)]
    filled = {"@LISTEN@": listen, "@UPSTREAM@": upstream, "@RUN@": run_dir, "@MAX_BODY@": str(max_body),
              "@READ_TIMEOUT@": f"{int(config['RECIPE_TIMEOUT']) + 30}s", "@HEADERS@": headers,
              "@UPSTREAM_IDLE@": f"{int(config['KEEPALIVE_SECONDS'] * 500)}ms",  # half gunicorn's keepalive
              "@HIDE@": hide, "@ERRORS@": "\n".join(errors),
              "@BYPASS@": proxy_bypass(), "@AS_ROOT@": _as_root(run_dir)}
    text = TEMPLATE.read_text()
    for name, value in filled.items():
        text = text.replace(name, value)
    return text


def init_app(app: Flask) -> None:
    @app.cli.command("proxy-config")
    @click.option("--listen", default="127.0.0.1:8000", show_default=True, help="nginx's listen address.")
    @click.option("--upstream", required=True, help="The web tier's address: host:port (or unix:/path).")
    @click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Where nginx keeps its pid.")
    def proxy_config(listen: str, upstream: str, run_dir: Path) -> None:
        """Print nginx's configuration for serving this app behind it."""
        click.echo(nginx_config(listen, upstream, str(run_dir.resolve())), nl=False)
