"""TensorViz: a model explorer whose recorded numbers can be re-executed on the server.

The package imports nothing itself: a recipe process (and the server it forks from) imports `app.compute.worker`
and gets the worker alone (no Flask, no blueprints), while the web process builds the app with `create_app`.
"""


def create_app(config: type | dict | None = None):
    """Build the app (app/web/factory.py)."""
    from .web.factory import create_app as build

    return build(config)
