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


class RecipeSuspended(RecipeError):
    """The recipe is suspended for a while (a run of it hung and was stopped): nothing was started. `retry_after`:
    the seconds until it is tried again."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RecipeRefused(RecipeError):
    """The recipe refused the request (recipekit.refusals.Refused): the message starts with the field at fault."""


class RecipeUnavailable(RecipeError):
    """The recipe cannot serve any request now (recipekit.refusals.Unavailable: a checkpoint it lacks)."""


def out_of_memory(exc: BaseException) -> bool:
    """Whether a run stopped for want of memory (the recipe process's bound, RECIPE_MEMORY_MB): the process's
    limit, never the request's fault, however the allocation that failed was made."""
    return isinstance(exc, MemoryError) or isinstance(exc, RuntimeError) and "alloc" in str(exc).lower()
