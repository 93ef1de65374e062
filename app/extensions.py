"""Extensions, created unbound here and bound to an app in create_app."""

from .catalog import ManifestStore
from .runner import RecipeRunner
from .state import SharedState

state = SharedState()
store = ManifestStore()
runner = RecipeRunner()
