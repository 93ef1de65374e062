"""Lab requests validated against the recipe's declaration: each field's type and range, from its sizes.

A recipe declares, per endpoint, fields such as
    input_ids = { type = "ints", length = "length", below = "vocab", required = true }
    image = { type = "grid", rows = "rows", cols = "cols", min = 0, max = "levels", required = true }
where a number may name one of the lab's sizes ("vocab"), which come from the recorded graph. The
same declaration gives the OpenAPI schema (app/web/openapi.py), so the two never disagree.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# grid: rows of integers, all rows equally long; edges: an undirected graph's edges, pairs of two different integers
TYPES = ("int", "ints", "grid", "edges", "number", "numbers", "choice", "text")
BODY_ONLY = ("grid", "edges")  # lists of lists: sent in a JSON body, never as a query parameter
EDGE_RULE = "Each pair joins two different values, and no pair is given twice in either order."
BOUNDS = ("min", "max", "below", "length", "min_length", "max_length", "rows", "cols")


class FieldError(ValueError):
    """A request field is wrong (the request answers 400); the message starts with the field at fault."""


class DeclarationError(ValueError):
    """The recipe's lab declaration cannot be used; the message names the endpoint and field."""


@dataclass(frozen=True)
class Field:
    """One request field, with every size already resolved to a number."""

    name: str
    type: str
    required: bool = False
    default: Any = None
    default_from: str | None = None
    min: float | None = None
    max: float | None = None  # inclusive; `below` in the declaration is max + 1
    values: tuple = ()
    length: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    rows: int | None = None
    cols: int | None = None
    unique: bool = False
    sorted: bool = False
    description: str = ""

    def json_schema(self) -> dict:
        """The field as JSON Schema (OpenAPI 3.1)."""
        if self.type == "choice":
            schema: dict = {"type": "string", "enum": list(self.values)}
        elif self.type == "text":
            schema = {"type": "string"}
            if self.min_length is not None:
                schema["minLength"] = self.min_length
            if self.max_length is not None:
                schema["maxLength"] = self.max_length
        else:
            scalar = {"type": "number" if self.type in ("number", "numbers") else "integer"}
            if self.min is not None:
                scalar["minimum"] = self.min
            if self.max is not None:
                scalar["maximum"] = self.max
            schema = scalar
            if self.type == "grid":
                row = {"type": "array", "items": scalar, "minItems": self.cols, "maxItems": self.cols}
                schema = {"type": "array", "items": row, "minItems": self.rows, "maxItems": self.rows}
            if self.type == "edges":
                schema = {"type": "array", "items": {"type": "array", "items": scalar, "minItems": 2, "maxItems": 2},
                          "uniqueItems": True}
                if self.min_length is not None:
                    schema["minItems"] = self.min_length
                if self.max_length is not None:
                    schema["maxItems"] = self.max_length
            if self.type in ("ints", "numbers"):
                schema = {"type": "array", "items": scalar}
                low = self.length if self.length is not None else self.min_length
                high = self.length if self.length is not None else self.max_length
                if low is not None:
                    schema["minItems"] = low
                if high is not None:
                    schema["maxItems"] = high
                if self.unique:
                    schema["uniqueItems"] = True
        if self.default is not None:
            schema["default"] = self.default
        description = " ".join(filter(None, (self.description, EDGE_RULE if self.type == "edges" else "")))
        if description:
            schema["description"] = description
        return schema

    @property
    def beyond_schema(self) -> bool:
        """Whether a value the field's JSON Schema admits may still be refused (an edge in both orders)."""
        return self.type == "edges"


def _resolve(value, sizes: dict[str, int], where: str):
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, str) and value in sizes:
        return sizes[value]
    raise DeclarationError(f"{where}: {value!r} is neither a number nor one of the sizes {', '.join(sizes)}")


def declared_field(name: str, spec: dict, sizes: dict[str, int], where: str) -> Field:
    """A field from its declaration, with sizes resolved."""
    field_type = spec.get("type")
    if field_type not in TYPES:
        raise DeclarationError(f"{where}.{name}.type must be one of {', '.join(TYPES)}")
    bounds = {key: _resolve(spec.get(key), sizes, f"{where}.{name}.{key}") for key in BOUNDS}
    if bounds["below"] is not None:
        bounds["max"] = bounds["below"] - 1
    if field_type == "choice" and not spec.get("values"):
        raise DeclarationError(f"{where}.{name}: a choice needs values")
    if field_type == "grid" and not all(isinstance(bounds[k], int) and bounds[k] > 0 for k in ("rows", "cols")):
        raise DeclarationError(f"{where}.{name}: a grid needs positive rows and cols")
    return Field(name=name, type=field_type, required=bool(spec.get("required")), default=spec.get("default"),
                 default_from=spec.get("default_from"), min=bounds["min"], max=bounds["max"],
                 values=tuple(spec.get("values", ())), length=bounds["length"], min_length=bounds["min_length"],
                 max_length=bounds["max_length"], rows=bounds["rows"], cols=bounds["cols"],
                 unique=bool(spec.get("unique")), sorted=bool(spec.get("sorted")),
                 description=spec.get("description", ""))


def fail(field: str, message: str):
    raise FieldError(f"{field}: {message}")


def _int(value, field: Field, where: str) -> int:
    """An integer in range. 2.0 is the integer 2, as JSON Schema (and so the API's document) counts it; JSON
    true/false and 2.5 are not integers."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        fail(where, f"must be an integer, not {type(value).__name__}")
    _in_range(value, field, where)
    return value


def _real(value, field: Field, where: str) -> float:
    """A number in range (an integer counts; true/false and NaN do not)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
        fail(where, f"must be a number, not {type(value).__name__}")
    _in_range(value, field, where)
    return float(value)


def _in_range(value, field: Field, where: str) -> None:
    if field.min is not None and value < field.min or field.max is not None and value > field.max:
        low = "" if field.min is None else _number(field.min)
        high = "" if field.max is None else _number(field.max)
        fail(where, f"{value} is out of range {low}..{high}")


def _number(value: float) -> str:
    """A bound as people write it: an integer in full (9223372036854775807, not 9.22337e+18), a float short."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e19 else f"{value:g}"


def _check(value, field: Field):
    name = field.name
    if field.type == "int":
        return _int(value, field, name)
    if field.type == "number":
        return _real(value, field, name)
    if field.type == "choice":
        if value not in field.values:
            fail(name, f"must be one of {', '.join(map(str, field.values))}")
        return value
    if field.type == "grid":
        return _grid(value, field)
    if field.type == "edges":
        return _edges(value, field)
    if field.type == "text":
        return _text(value, field)
    what = "numbers" if field.type == "numbers" else "integers"
    if not isinstance(value, list):
        fail(name, f"must be a list of {what}")
    if field.length is not None and len(value) != field.length:
        fail(name, f"must hold exactly {field.length} values, not {len(value)}")
    if field.min_length is not None and len(value) < field.min_length:
        fail(name, f"must hold at least {field.min_length} value{'s' * (field.min_length != 1)}")
    if field.max_length is not None and len(value) > field.max_length:
        fail(name, f"must hold at most {field.max_length} values, not {len(value)}")
    check = _real if field.type == "numbers" else _int
    items = [check(v, field, f"{name}[{i}]") for i, v in enumerate(value)]
    if field.unique and len(set(items)) != len(items):
        fail(name, "names a value twice")
    return sorted(items) if field.sorted else items


def _text(value, field: Field) -> str:
    """A string of a declared length in characters, without control characters but for tabs and newlines."""
    if not isinstance(value, str):
        fail(field.name, f"must be a string, not {type(value).__name__}")
    if field.min_length is not None and len(value.strip()) < field.min_length:
        fail(field.name, f"must hold at least {field.min_length} character{'s' * (field.min_length != 1)}")
    if field.max_length is not None and len(value) > field.max_length:
        fail(field.name, f"must hold at most {field.max_length} characters, not {len(value)}")
    if any(ord(c) < 32 and c not in "\t\n\r" or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        fail(field.name, "holds a control character or an unpaired surrogate")
    return value


def _edges(value, field: Field) -> list[list[int]]:
    """Pairs [a, b] of two different integers in range, no pair given twice in either order (an undirected graph's
    edges, without loops); the message names the pair at fault."""
    name = field.name
    if not isinstance(value, list):
        fail(name, "must be a list of pairs [a, b]")
    if field.min_length is not None and len(value) < field.min_length:
        fail(name, f"must hold at least {field.min_length} pair{'s' * (field.min_length != 1)}")
    if field.max_length is not None and len(value) > field.max_length:
        fail(name, f"must hold at most {field.max_length} pairs, not {len(value)}")
    seen: dict[frozenset, int] = {}
    edges = []
    for i, pair in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            fail(where, "must be a pair [a, b] of two integers")
        a, b = (_int(v, field, f"{where}[{k}]") for k, v in enumerate(pair))
        if a == b:
            fail(where, f"joins {a} to itself; an edge joins two different values")
        if (key := frozenset((a, b))) in seen:
            fail(where, f"repeats {name}[{seen[key]}] ({a} and {b} are joined once)")
        seen[key] = i
        edges.append([a, b])
    return edges


def _grid(value, field: Field) -> list[list[int]]:
    """`rows` lists of `cols` integers in range; the message names the row or the cell at fault."""
    name = field.name
    if not isinstance(value, list):
        fail(name, f"must be a list of {field.rows} rows")
    if len(value) != field.rows:
        fail(name, f"must hold exactly {field.rows} rows, not {len(value)}")
    for r, row in enumerate(value):
        if not isinstance(row, list):
            fail(f"{name}[{r}]", f"must be a list of {field.cols} integers")
        if len(row) != field.cols:
            fail(f"{name}[{r}]", f"must hold exactly {field.cols} values, not {len(row)}")
    return [[_int(v, field, f"{name}[{r}][{c}]") for c, v in enumerate(row)] for r, row in enumerate(value)]


def validate(body: Any, fields: dict[str, Field]) -> dict:
    """A JSON body checked field by field; the 400's message starts with the field at fault."""
    if not isinstance(body, dict):
        fail("body", "send a JSON object (Content-Type: application/json)")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        fail(unknown[0], f"unknown field; the fields are {', '.join(sorted(fields))}")
    args = {}
    for name, field in fields.items():
        if name in body:
            if body[name] is None:
                fail(name, "must not be null; leave the field out for its default")
            args[name] = _check(body[name], field)
        elif field.required:
            fail(name, "is required")
        elif field.default is not None:
            args[name] = field.default
    for name, field in fields.items():
        if field.default_from and name not in args and field.default_from in args:
            args[name] = args[field.default_from]
    return args


def parse_query(query: Mapping[str, list[str]], fields: dict[str, Field]) -> dict:
    """Query parameters (each name with every value it was given) into the JSON body they stand for. A list
    is comma-separated in one value (`input_ids=1,4,3`, as the pages link) or one value per repetition
    (`input_ids=1&input_ids=4&input_ids=3`, as generated clients send it)."""
    unknown = sorted(set(query) - set(fields))
    if unknown:
        fail(unknown[0], f"unknown parameter; the parameters are {', '.join(sorted(fields))}")
    body: dict = {}
    for name, values in query.items():
        field_type = fields[name].type
        if field_type in BODY_ONLY:
            fail(name, f"{'a grid' if field_type == 'grid' else 'a list of edges'} is sent in a JSON body (POST), not "
                       "as a query parameter")
        if len(values) > 1 and field_type not in ("ints", "numbers"):
            fail(name, f"is given {len(values)} times; give it once")
        raw = ",".join(values)
        try:
            if field_type in ("ints", "numbers"):
                parse = int if field_type == "ints" else float
                body[name] = [parse(v) for v in raw.split(",")] if raw else []
            elif field_type == "int":
                body[name] = int(raw)
            elif field_type == "number":
                body[name] = float(raw)
            else:
                body[name] = raw
        except ValueError:
            what = {"ints": "comma-separated integers", "numbers": "comma-separated numbers",
                    "int": "an integer"}.get(field_type, f"a {field_type}")
            fail(name, f"must be {what}, not {raw[:40]!r}")
    return body
