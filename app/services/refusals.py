"""What a service refuses a request with, in its own words and without HTTP: the web tier answers each with the
status the web tier's one table gives it (web/errors.py STATUS)."""


class ModelMissing(LookupError):
    """No model answers to the slug asked for (a variant: never made, or no longer kept): the message says why."""


class NoLiveLab(LookupError):
    """The model has no live lab to run a lab request on."""


class BudgetSpent(Exception):
    """The client's compute budget is spent: `retry_after` seconds until a run may start, None where none ever
    can (a cost over the whole budget)."""

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RequirementMissing(Exception):
    """What the request would run needs a package this server lacks: the message names it and the command that
    installs it. Refused before anything starts."""


class NotYours(Exception):
    """The request acts on what another client started (a retraining's cancel without its starter's token)."""


class ModelUnavailable(Exception):
    """The model's folder exists but cannot be served now (a run of it hung, its recipe cannot start, its files are
    refused): the message says why, `retry_after` when to ask again."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
