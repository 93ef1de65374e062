"""How the pages write a number. Tables and downloads give every value to four significant digits (`significant`);
prose, bars and metric cards, what a learner reads as words, say a number too small to matter as "about 0" (`in_prose`).
static/js/charts.js writes both the same way, and a browser test holds the two equal over a table of values."""

import numpy as np

SCIENTIFIC_BELOW = 1e-4  # a number smaller than this (once rounded) is written as 1.2e-14 in a table
ABOUT_ZERO = "about 0"  # what prose says for such a number: a learner cannot read 6.287e-17


def significant(value: float, digits: int = 4) -> str:
    """A number to `digits` significant digits, positional (0.2461, 1234000) down to 1e-4 and scientific below it
    (5.626e-5, 1.2e-14: a long run of zeros cannot be counted at a glance), trailing zeros dropped."""
    rounded = float(f"{value:.{digits - 1}e}")
    if rounded != 0 and abs(rounded) < SCIENTIFIC_BELOW:
        mantissa, exponent = f"{rounded:.{digits - 1}e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return np.format_float_positional(value, precision=digits, unique=True, fractional=False, trim="-")


def in_prose(value: float, digits: int = 4) -> str:
    """A number as prose says it: `significant`, except that one below 1e-4 (once rounded), which a table writes
    in scientific notation, is "about 0"."""
    rounded = float(f"{value:.{digits - 1}e}")
    return ABOUT_ZERO if rounded != 0 and abs(rounded) < SCIENTIFIC_BELOW else significant(value, digits)
