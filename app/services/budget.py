"""One per-client budget for the recipe runs a client starts (verifications, what-if runs, samplers,
generations, traces, interventions, training stages), kept in the shared state so that it holds across
processes and machines. Spent where a run starts (runs.submit on a cache miss, a verification job that no
running one answers): a refused request and a kept answer start nothing and spend nothing."""

import re
from functools import lru_cache

from flask import current_app, request
from werkzeug.exceptions import TooManyRequests

from .extensions import state

PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
BUDGET = re.compile(r"^\s*(\d+)\s*(?:per|/)\s*(?:(\d+)\s*)?(second|minute|hour|day)s?\s*$")


@lru_cache(maxsize=8)
def parse(text: str) -> tuple[int, int, str]:
    """"120 per minute" -> (120, 60, "1 minute")."""
    found = BUDGET.match(text)
    if not found:
        raise ValueError(f"COMPUTE_BUDGET {text!r} is not like '120 per minute'")
    count, many, period = int(found[1]), int(found[2] or 1), found[3]
    return count, many * PERIODS[period], f"{many} {period}{'s' * (many != 1)}"


def spend() -> None:
    """Count this request against its client's budget; 429 with Retry-After once it is spent."""
    limit, window, said = parse(current_app.config["COMPUTE_BUDGET"])
    count, left = state.store.hit(f"budget:{request.remote_addr}", window)
    if count > limit:
        raise TooManyRequests(f"compute budget of {limit} requests per {said} exceeded; it renews in "
                              f"{max(1, round(left))} s", retry_after=max(1, round(left)))
