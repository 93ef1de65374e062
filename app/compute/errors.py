"""How a recipe run ends without a result, whichever executor ran it."""


class RecipeError(Exception):
    """A recipe run ended without a result; the message is fit for a report."""


class RecipeTimeout(RecipeError):
    pass


class PoolBusy(RecipeError):
    """Every worker is busy and the queue is full: come back later."""


class RecipeCrashed(RecipeError):
    pass


class ComputeUnavailable(RecipeError):
    """The compute tier cannot take the run now (its queue cannot be reached): nothing was started."""


class RecipeRefused(RecipeError):
    """The recipe refused the request (400, the message names the field) or cannot serve it (503)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
