"""TensorViz: a model explorer whose recorded numbers can be re-executed on the server."""

from flask import Flask

from . import api, cli, downloads, errors, pages
from .config import Config
from .extensions import cache, runner, store
from .verification import verifications


def create_app(config: type | dict | None = None) -> Flask:
    """Build the app: configuration, extensions, blueprints, error handlers and commands."""
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_object(Config)
    app.config.from_prefixed_env("TENSORVIZ")
    if isinstance(config, dict):
        app.config.update(config)
    elif config is not None:
        app.config.from_object(config)

    cache.init_app(app)
    store.init_app(app)
    runner.init_app(app)
    verifications.init_app(app)

    app.register_blueprint(api.bp)
    app.register_blueprint(downloads.bp)
    app.register_blueprint(pages.bp)
    errors.register(app)
    cli.register(app)
    return app
