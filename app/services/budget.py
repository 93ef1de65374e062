"""One per-client budget for the recipe runs a client starts (verifications, what-if runs, samplers,
generations, traces, interventions, training stages), kept in the shared state so that it holds across
processes and machines. Spent where a run starts (runs.submit on a cache miss, a verification job that no
running one answers): a refused request and a kept answer start nothing and spend nothing."""

import math
import re
from functools import lru_cache

from flask import current_app, request

from .extensions import state
from .refusals import BudgetSpent

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


def spend(units: int = 1) -> None:
    """Count this run (`units` runs: a retraining costs RETRAINING_COST) against its client's budget, over any span
    of its period (a sliding window, in the shared store); 429 with Retry-After, the seconds until enough runs
    counted leave the window, once it is spent (BudgetSpent)."""
    limit, window, said = parse(current_app.config["COMPUTE_BUDGET"])
    wait = state.store.admit(f"budget:{request.remote_addr}", limit, window, units)
    if wait == math.inf:  # the store's answer for a cost over the whole budget
        raise BudgetSpent(f"this costs {units} runs of a compute budget of {limit} per {said}: it can never "
                          "start on this server")
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        cost = f" (this costs {units})" if units > 1 else ""
        raise BudgetSpent(f"compute budget of {limit} requests per {said} exceeded{cost}; the next may start in "
                          f"{seconds} s", retry_after=seconds)
