"""Plain data to and from JSON, fast where it can be and strict about NaN and infinity."""

import json

import orjson


def dumps(value) -> tuple[bytes, bool]:
    """`value` as compact JSON bytes, and whether it is JSON proper (False: it holds NaN or infinity, written as
    NaN and Infinity, which only a replay's comparison reads).

    orjson writes about twenty times faster than the standard library, but writes NaN and infinity as null: its
    bytes are used only where they hold no null at all (so none stands for a NaN); otherwise, and for what
    orjson refuses (keys that are not strings, integers past 64 bits), the standard library writes them, telling
    None, NaN and infinity apart."""
    try:
        fast = orjson.dumps(value)
    except TypeError:
        fast = b"null"
    if b"null" not in fast:
        return fast, True
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode(), True
    except ValueError:
        return json.dumps(value, separators=(",", ":")).encode(), False


def loads(text: str | bytes):
    """JSON read back: orjson for JSON proper, the standard library for what orjson refuses (NaN and Infinity,
    which `dumps` writes for a non-finite replay, and integers past 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
