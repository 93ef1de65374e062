"""The application factory: configuration, extensions, blueprints, error handlers and commands."""

import os
import secrets

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from . import api, assets, cli, compression, downloads, errors, pages, response_cache, security
from .config import Config
from .extensions import runner, state, store
from .verification import verifications


class StrictJSON(DefaultJSONProvider):
    """The one JSON encoder of every answer: NaN and infinity are not JSON, so they are refused (an error
    the app reports) rather than written as tokens a client's parser rejects."""

    def dumps(self, obj, **kwargs) -> str:
        kwargs.setdefault("allow_nan", False)
        return super().dumps(obj, **kwargs)


def create_app(config: type | dict | None = None) -> Flask:
    """Build the app: configuration, extensions, blueprints, error handlers and commands."""
    app = Flask("app", template_folder="../templates", static_folder="../static")
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

    state.init_app(app)
    compression.init_app(app)
    store.init_app(app)
    runner.init_app(app)
    verifications.init_app(app)

    app.register_blueprint(api.bp)
    app.register_blueprint(downloads.bp)
    app.register_blueprint(pages.bp)
    assets.init_app(app)
    errors.register(app)
    response_cache.init_app(app)  # before security's ProxyFix wraps it, so it sees the client's scheme
    security.init_app(app)
    cli.register(app)
    return app
