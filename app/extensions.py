"""Extensions, created unbound here and bound to an app in create_app."""

from flask_caching import Cache

from .catalog import ManifestStore
from .runner import RecipeRunner

cache = Cache()
store = ManifestStore()
runner = RecipeRunner()
