"""TensorViz: a model explorer whose recorded numbers can be re-executed on the server."""

import os
import secrets

from flask import Flask

from . import api, assets, cli, downloads, errors, pages, security
from .config import Config
from .extensions import cache, compress, limiter, runner, store
from .verification import verifications


def use_redis(app: Flask, url: str | None) -> None:
    """Point the cache and the rate limiter at a shared Redis, when one is configured."""
    if not url:
        return
    app.config.update(
        REDIS_URL=url,
        CACHE_TYPE="app.cache_backend.ResilientRedisCache",
        CACHE_REDIS_URL=url,
        CACHE_KEY_PREFIX="tensorviz:",
        RATELIMIT_STORAGE_URI=url,
    )


def create_app(config: type | dict | None = None) -> Flask:
    """Build the app: configuration, extensions, blueprints, error handlers and commands."""
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_object(Config)
    app.config.from_prefixed_env("TENSORVIZ")
    if isinstance(config, dict):
        app.config.update(config)
    elif config is not None:
        app.config.from_object(config)
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    use_redis(app, app.config["REDIS_URL"] or os.environ.get("REDIS_URL"))

    cache.init_app(app)
    compress.init_app(app)
    limiter.init_app(app)
    store.init_app(app)
    runner.init_app(app)
    verifications.init_app(app)

    app.register_blueprint(api.bp)
    app.register_blueprint(downloads.bp)
    app.register_blueprint(pages.bp)
    assets.init_app(app)
    errors.register(app)
    security.init_app(app)
    cli.register(app)
    return app
