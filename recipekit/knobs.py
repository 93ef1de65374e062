"""Knobs: the training settings a recipe lets a learner move, declared in its recipe.toml and read by its train.py.

    [training.knobs.learning_rate]
    description = "learning rate: how big a step each update takes"
    min = 0.01
    max = 2.0
    default = 0.5

    [training.knobs.data]
    description = "the data: the pattern the network must learn"
    choices = ["xor", "circles", "spiral"]
    default = "xor"

A knob is a number from `min` to `max` (whole where its default and bounds are, with a `step` where it matters) or
one of its `choices`. train.py takes them from its command line (`python train.py --knob learning_rate=0.3`,
repeated) or, as the server passes them, from TENSORVIZ_KNOBS (a JSON object); a knob not given keeps its default.
The catalog reads a declaration with the same `parse`, so that a knob is refused in the same words where it is served.
Knobs at their defaults train the recorded model; moved ones, a variant, which train.py writes to a folder of its own
(`variants/<id>/` beside it unless `--out` names one), never over the recorded weights, with a knobs.json of every
knob's value: in that folder train.py (`--check` too) and run.py read the variant's knobs from it (`settings`).
Imports no torch.
"""

import hashlib
import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = "TENSORVIZ_KNOBS"  # how the server passes a variant's knobs to train.py: a JSON object
RECIPE = "recipe.toml"
VARIANTS = "variants"  # where train.py alone writes a variant, in its recipe folder
SETTINGS = "knobs.json"  # written beside a variant's weights: the knobs it was trained with, all of them


class KnobError(ValueError):
    """A knob that is unknown, or a value it cannot take; the message names the knob."""


Value = float | int | str


@dataclass(frozen=True)
class Knob:
    """One setting a learner may move: a number within [minimum, maximum] (whole where `integer`) or a choice."""

    name: str
    description: str
    default: Value
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def integer(self) -> bool:
        """Whole numbers only: where the default and both bounds are whole."""
        return not self.choices and all(
            isinstance(v, int) and not isinstance(v, bool) for v in (self.default, self.minimum, self.maximum)
        )

    def read(self, value: object) -> Value:
        """The value as the knob takes it (a number given as text is read), else KnobError naming the knob."""
        if self.choices:
            if value not in self.choices:
                raise KnobError(f"{self.name}: {_quoted(value)} is not one of {', '.join(self.choices)}")
            return str(value)
        number = _number(self.name, value)
        if self.integer:
            if number != int(number):
                raise KnobError(f"{self.name}: {_quoted(value)} is not a whole number")
            number = int(number)
        if not self.minimum <= number <= self.maximum:
            raise KnobError(
                f"{self.name}: {_shown(number)} is out of range {_shown(self.minimum)}..{_shown(self.maximum)}"
            )
        return number


def _number(name: str, value: object) -> float:
    if isinstance(value, bool):
        raise KnobError(f"{name}: {_quoted(value)} is not a number")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise KnobError(f"{name}: {_quoted(value)} is not a number") from None
    except OverflowError:  # a whole number JSON holds but no float does (400 digits)
        raise KnobError(f"{name}: {_quoted(value)} has too many digits to be a number") from None
    if not math.isfinite(number):
        raise KnobError(f"{name}: {_quoted(value)} is not a finite number")
    return number


def _quoted(value: object) -> str:
    """The value as a message shows it: its first 40 characters, where a client sent a longer one."""
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:37]}..."


def _shown(value: float) -> str:
    return f"{value:g}"


def parse(table: Mapping[str, Mapping]) -> dict[str, Knob]:
    """[training.knobs] as recipe.toml holds it, each knob checked; KnobError says what is wrong."""
    knobs = {}
    for name, spec in table.items():
        where = f"training.knobs.{name}"
        if not name.isidentifier() or not isinstance(spec, Mapping):
            raise KnobError(f"{where}: needs a plain name and a table")
        description = spec.get("description")
        if not isinstance(description, str) or not description:
            raise KnobError(f"{where}.description: says what the knob changes, for the learner")
        if "choices" in spec:
            choices = spec["choices"]
            if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
                raise KnobError(f"{where}.choices: a list of names")
            knob = Knob(name, description, spec.get("default", choices[0]), choices=tuple(choices))
        else:
            bounds = [spec.get(key) for key in ("min", "max", "default")]
            if not all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds):
                raise KnobError(f"{where}: needs min, max and default numbers (or choices)")
            if not bounds[0] <= bounds[2] <= bounds[1] or bounds[0] == bounds[1]:
                raise KnobError(f"{where}: the default must lie within min..max, and min below max")
            step = spec.get("step")
            if step is not None and (not isinstance(step, int | float) or step <= 0):
                raise KnobError(f"{where}.step: a number above 0")
            knob = Knob(name, description, bounds[2], bounds[0], bounds[1], step)
        knob.read(knob.default)  # a default outside its own choices is the declaration's fault
        knobs[name] = knob
    return knobs


def declared(recipe_dir: Path) -> dict[str, Knob]:
    """The knobs a recipe folder's recipe.toml declares (none: {})."""
    with open(Path(recipe_dir) / RECIPE, "rb") as file:
        return parse(tomllib.load(file).get("training", {}).get("knobs", {}))


def chosen(knobs: Mapping[str, Knob], given: Mapping[str, object]) -> dict[str, Value]:
    """Every knob's value: the given one, read (Knob.read), else its default; KnobError for a knob not declared."""
    unknown = sorted(set(given) - set(knobs))
    if unknown:
        known = ", ".join(knobs) or "none"
        raise KnobError(f"{unknown[0]}: is not a knob of this recipe (its knobs: {known})")
    return {name: knob.read(given[name]) if name in given else knob.default for name, knob in knobs.items()}


def moved(knobs: Mapping[str, Knob], values: Mapping[str, Value]) -> dict[str, Value]:
    """The knobs whose value is not their default: none, the recorded model; some, a variant."""
    return {name: value for name, value in values.items() if value != knobs[name].default}


def variant_id(values: Mapping[str, Value]) -> str:
    """A variant's name, from its moved knobs alone (the same knobs, the same variant): 12 hex digits."""
    return hashlib.sha256(json.dumps(dict(values), sort_keys=True).encode()).hexdigest()[:12]


def stored(recipe_dir: Path) -> dict[str, object] | None:
    """The knobs a variant's folder was trained with (its knobs.json, as train.py wrote it); None for a recipe folder
    that is no variant's."""
    path = Path(recipe_dir) / SETTINGS
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text())
    except ValueError:
        raise KnobError(f"{SETTINGS}: is not a JSON object") from None
    if not isinstance(found, dict):
        raise KnobError(f"{SETTINGS}: is not a JSON object")
    return found


def settings(recipe_dir: Path) -> dict[str, Value]:
    """Every knob's value in this recipe folder: a variant's own (knobs.json), else the defaults (the recorded
    model). What run.py and lab.py read where a knob changes the data they show."""
    return chosen(declared(recipe_dir), stored(recipe_dir) or {})


def given(argv: list[str], recipe_dir: Path | None = None) -> dict[str, object]:
    """The knobs train.py was given: its folder's own (a variant's knobs.json), then TENSORVIZ_KNOBS (a JSON
    object) over them, then each `--knob name=value` of its command line; KnobError for one that is not
    name=value."""
    found: dict = dict((stored(recipe_dir) if recipe_dir is not None else None) or {})
    if os.environ.get(ENVIRONMENT):
        try:
            environment = json.loads(os.environ[ENVIRONMENT])
        except ValueError:
            raise KnobError(f"{ENVIRONMENT}: is not a JSON object") from None
        if not isinstance(environment, dict):
            raise KnobError(f"{ENVIRONMENT}: is not a JSON object")
        found |= environment
    for k, arg in enumerate(argv):
        if arg == "--knob":
            pair = argv[k + 1] if k + 1 < len(argv) else ""
            name, sep, value = pair.partition("=")
            if not sep or not name:
                raise KnobError(f"--knob {pair!r}: give it as name=value")
            found[name] = value
    return found


def out_folder(argv: list[str], recipe_dir: Path, moved_values: Mapping[str, Value]) -> Path | None:
    """Where train.py writes a variant: `--out DIR`, else variants/<id>/ in the recipe folder; None for the recorded
    model (no knob moved, no --out) and for a variant's own folder trained with its own knobs (its knobs.json)."""
    if "--out" in argv:
        k = argv.index("--out")
        if k + 1 >= len(argv):
            raise KnobError("--out: give it a folder")
        return Path(argv[k + 1])
    own = stored(recipe_dir)
    knobs = declared(recipe_dir)
    if own is not None and moved(knobs, chosen(knobs, own)) == dict(moved_values):
        return None
    return Path(recipe_dir) / VARIANTS / variant_id(moved_values) if moved_values else None
