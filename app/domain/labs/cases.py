"""A recorded (or live) case's items by key, as the lab kinds read them."""


def vectors(case: dict) -> dict[str, list]:
    """The case's vectors' values by key."""
    return {v["key"]: v["values"] for v in case.get("vectors", [])}


def metrics(case: dict) -> dict[str, float]:
    """The case's metrics' values by key."""
    return {m["key"]: m["value"] for m in case.get("metrics", [])}


def right_of(predicted: list, expected: list | None) -> int | None:
    """How many of the answers equal the right ones, position by position; None where there are no right ones."""
    return None if expected is None else sum(p == e for p, e in zip(predicted, expected, strict=False))


def quoted(names: list[str]) -> str:
    """Tokens as a learner reads them: “1 1 3 4”."""
    return f"“{' '.join(names)}”"


def sequence_presets(cases: list[dict], field: str) -> list[dict]:
    """Each case that holds a sequence under `field` (a vector of token ids) as the run request that replays it."""
    return [{"id": case["id"], "label": case["label"], "request": {field: sequence}}
            for case in cases if (sequence := vectors(case).get(field)) is not None]


def input_tokens(case: dict, spec) -> list[dict] | None:
    """The case's input tokens (its `input_ids` vector) as an axis of ids and names, or None without one."""
    ids = vectors(case).get("input_ids")
    return None if ids is None else spec.tokens(ids)


# What an attention map's rows and columns are, said on both axes of every one the page draws.
ATTENTION_TITLES = {"rows": "query", "columns": "key"}  # words the glossary explains


def attention_axes(rows: list[dict], columns: list[dict]) -> dict:
    """The axes of an attention map: queries down, keys across, each named by its token and titled."""
    return {"rows": rows, "columns": columns, "titles": ATTENTION_TITLES}
