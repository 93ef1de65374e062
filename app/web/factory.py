"""The application factory: configuration, extensions, blueprints, error handlers and commands."""

import os
import secrets

from flask import Flask
from flask.json.provider import DefaultJSONProvider
from jinja2 import ChoiceLoader, FunctionLoader

from ..build import cli
from ..build.variants import variants as variant_jobs
from ..domain.jsonbytes import compact
from ..domain.labs import kind_files
from ..services import cache as answer_cache
from ..services.config import Config, settings
from ..services.extensions import models, state, workers
from ..services.retraining import retrainings
from ..services.verification import verifications
from . import api, assets, compression, conditional, downloads, errors, pages, proxy, response_cache, security
from .variants import ModelPath, Revision


class StrictJSON(DefaultJSONProvider):
    """The one JSON encoder of every answer: NaN and infinity are not JSON, so they are refused (an error
    the app reports) rather than written as tokens a client's parser rejects. A compact answer (what
    `jsonify` writes out of debug mode) is written by orjson where it can be (jsonbytes.compact), several times
    faster than the standard library on an answer of hundreds of thousands of numbers (a DataLab trace's What if?)."""

    def dumps(self, obj, **kwargs) -> str:
        if kwargs == {"separators": (",", ":")}:
            fast = compact(obj, sort_keys=self.sort_keys, defaults=True)
            if fast is not None:
                return fast.decode()
        kwargs.setdefault("allow_nan", False)
        return super().dumps(obj, **kwargs)


def kind_templates() -> FunctionLoader:
    """The lab kinds' templates, from each kind's folder, under the names `labs/<kind>.html`."""
    files = {name: path for name, path in kind_files().items() if name.endswith(".html")}

    def load(name: str):
        path = files.get(name)
        if path is None:
            return None
        stamp = path.stat().st_mtime_ns
        return path.read_text(), str(path), lambda: path.stat().st_mtime_ns == stamp

    return FunctionLoader(load)


def create_app(config: type | dict | None = None) -> Flask:
    """Build the app: configuration, extensions, blueprints, error handlers and commands."""
    app = Flask("app", template_folder="../templates", static_folder="../static")
    app.jinja_loader = ChoiceLoader([app.jinja_loader, kind_templates()])
    app.json = StrictJSON(app)
    app.config.from_object(Config)
    app.config.from_prefixed_env("TENSORVIZ")
    if isinstance(config, dict):
        app.config.update(config)
    elif config is not None:
        app.config.from_object(config)
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    app.config["REDIS_URL"] = app.config["REDIS_URL"] or os.environ.get("REDIS_URL")
    app.config.update(settings(app.config))  # each setting checked, as its type

    state.init_app(app)
    answer_cache.init_app(app)
    conditional.init_app(app)  # before compression: it answers with the encoded representation's ETag
    compression.init_app(app)
    models.init_app(app)
    workers.init_app(app)
    verifications.init_app(app)
    retrainings.init_app(app)
    variant_jobs.init_app(app)

    app.url_map.converters["model"] = ModelPath  # a model's slug, or a variant's path under it
    app.url_map.converters["revision"] = Revision
    app.register_blueprint(api.bp)
    app.register_blueprint(downloads.bp)
    app.register_blueprint(pages.bp)
    assets.init_app(app)
    errors.register(app)
    response_cache.init_app(app)  # before security's ProxyFix wraps it, so it sees the client's scheme
    security.init_app(app)
    cli.register(app)
    proxy.init_app(app)
    return app
