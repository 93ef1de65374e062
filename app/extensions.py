"""Extensions, created unbound here and bound to an app in create_app."""

from flask_caching import Cache
from flask_compress import Compress

from .catalog import ManifestStore
from .runner import RecipeRunner

cache = Cache()
compress = Compress()
store = ManifestStore()
runner = RecipeRunner()
