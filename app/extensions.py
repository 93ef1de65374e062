"""Extensions, created unbound here and bound to an app in create_app."""

from flask_caching import Cache
from flask_compress import Compress
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from .catalog import ManifestStore
from .runner import RecipeRunner

cache = Cache()
compress = Compress()
limiter = Limiter(key_func=get_remote_address)
store = ManifestStore()
runner = RecipeRunner()
