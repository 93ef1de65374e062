"""Lab requests validated against the recipe's declaration: each field's type and range, from its sizes.

A recipe declares, per endpoint, fields such as
    input_ids = { type = "ints", length = "length", below = "vocab", required = true }
    image = { type = "grid", rows = "rows", cols = "cols", min = 0, max = "levels", required = true }
where a number may name one of the lab's sizes ("vocab"), which come from the recorded graph. Each declared field
is a pydantic type (`Field.annotation`): a request is validated by the TypedDict of its endpoint's fields, and the
same types give the OpenAPI schema (app/web/openapi.py), so the two never disagree. A pydantic error is told in the
API's words, the field at fault first (`_message`).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import AfterValidator, BeforeValidator, ConfigDict, TypeAdapter, ValidationError
from pydantic import Field as Constraint
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

# grid: rows of integers, all rows equally long; edges: an undirected graph's edges, pairs of two different integers
TYPES = ("int", "ints", "grid", "edges", "number", "numbers", "choice", "text")
BODY_ONLY = ("grid", "edges")  # lists of lists: sent in a JSON body, never as a query parameter
EDGE_RULE = "Each pair joins two different values, and no pair is given twice in either order."
BOUNDS = ("min", "max", "below", "length", "min_length", "max_length", "rows", "cols")


class FieldError(ValueError):
    """A request field is wrong (the request answers 400); the message starts with the field at fault."""


class DeclarationError(ValueError):
    """The recipe's lab declaration cannot be used; the message names the endpoint and field."""


@dataclass(frozen=True, eq=False)  # one field is one object: its request type is made once (validate)
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
        """The field as JSON Schema (OpenAPI 3.1): pydantic's own schema of the type that validates it."""
        return dict(self._schema)

    @cached_property
    def _schema(self) -> dict:
        schema = TypeAdapter(self.annotation()).json_schema()
        if self.default is not None:
            schema["default"] = self.default
        description = " ".join(filter(None, (self.description, EDGE_RULE if self.type == "edges" else "")))
        if description:
            schema["description"] = description
        return schema

    def annotation(self) -> Any:
        """The type a value of this field is validated as (pydantic), its bounds and rules on it: its messages are
        told by `_message`."""
        if self.type == "choice":
            return Literal[self.values]
        if self.type == "text":
            bounds = {"minLength": self.min_length, "maxLength": self.max_length}
            return Annotated[str, AfterValidator(partial(_text, self)),
                             WithSchema({k: v for k, v in bounds.items() if v is not None})]
        base = float if self.type in ("number", "numbers") else int
        scalar = Annotated[base, Constraint(ge=self.min, le=self.max), BeforeValidator(_number_or_fail)]
        if self.type in ("int", "number"):
            return scalar
        if self.type == "grid":
            row = _sized(list[scalar], self.cols, self.cols)
            return _sized(list[row], self.rows, self.rows)
        if self.type == "edges":
            pair = _sized(list[scalar], 2, 2)
            return Annotated[_sized(list[pair], self.min_length, self.max_length),
                             AfterValidator(partial(_edges, self)), WithSchema({"uniqueItems": True})]
        low = self.length if self.length is not None else self.min_length
        high = self.length if self.length is not None else self.max_length
        return Annotated[_sized(list[scalar], low, high), AfterValidator(partial(_list, self)),
                         WithSchema({"uniqueItems": True} if self.unique else {})]

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


class WithSchema:
    """JSON Schema keywords a rule checked by a validator adds to a type's schema (uniqueItems, a text's length)."""

    def __init__(self, extra: dict) -> None:
        self.extra = extra

    def __get_pydantic_json_schema__(self, core_schema, handler) -> dict:
        return handler(core_schema) | self.extra


def _refused(where: str | None, message: str) -> PydanticCustomError:
    """A rule of the declaration broken: the message as the reader reads it, at `where` (else the value's place)."""
    return PydanticCustomError("declared", "{message}", {"message": message, "where": where})


def _sized(list_type: Any, low: int | None, high: int | None) -> Any:
    """A list type of `low` to `high` items, its length checked before its items (a list of the wrong length is
    told so, whatever its items are)."""
    def length_first(value: Any) -> Any:
        if isinstance(value, list) and (low is not None and len(value) < low or high is not None and len(value) > high):
            kind = "too_short" if low is not None and len(value) < low else "too_long"
            raise PydanticCustomError(kind, "wrong length", {"actual_length": len(value)})
        return value

    return Annotated[list_type, Constraint(min_length=low, max_length=high), BeforeValidator(length_first)]


def _number_or_fail(value: Any) -> Any:
    """Only JSON numbers are numbers: true/false and "2" are not (pydantic's lax mode would take them), nor NaN."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise PydanticCustomError("not_a_number", "not a number")
    return value


def _text(field: Field, value: str) -> str:
    """A string of a declared length in characters, without control characters but for tabs and newlines."""
    if field.min_length is not None and len(value.strip()) < field.min_length:
        raise _refused(None, f"must hold at least {field.min_length} character{'s' * (field.min_length != 1)}")
    if field.max_length is not None and len(value) > field.max_length:
        raise _refused(None, f"must hold at most {field.max_length} characters, not {len(value)}")
    if any(ord(c) < 32 and c not in "\t\n\r" or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise _refused(None, "holds a control character or an unpaired surrogate")
    return value


def _list(field: Field, items: list) -> list:
    if field.unique and len(set(items)) != len(items):
        raise _refused(None, "names a value twice")
    return sorted(items) if field.sorted else items


def _edges(field: Field, edges: list[list[int]]) -> list[list[int]]:
    """No edge from a value to itself, no pair given twice in either order; the message names the pair at fault."""
    seen: dict[frozenset, int] = {}
    for i, (a, b) in enumerate(edges):
        where = f"{field.name}[{i}]"
        if a == b:
            raise _refused(where, f"joins {a} to itself; an edge joins two different values")
        if (key := frozenset((a, b))) in seen:
            raise _refused(where, f"repeats {field.name}[{seen[key]}] ({a} and {b} are joined once)")
        seen[key] = i
    return edges


def _number(value: float) -> str:
    """A bound as people write it: an integer in full (9223372036854775807, not 9.22337e+18), a float short."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e19 else f"{value:g}"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def _message(field: Field, error: dict) -> tuple[str, str]:
    """Where a pydantic error of this field's value lies (`image[2][3]`) and what is wrong there, in the words the
    API has always used."""
    loc = error["loc"][1:]
    where = field.name + "".join(f"[{i}]" for i in loc)
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    integers = field.type not in ("number", "numbers")
    if kind == "declared":
        return ctx["where"] or where, ctx["message"]
    if not loc and value is None:
        return where, "must not be null; leave the field out for its default"
    if kind in ("greater_than_equal", "less_than_equal"):
        shown = int(value) if integers and isinstance(value, float) and value.is_integer() else value
        low = "" if field.min is None else _number(field.min)
        high = "" if field.max is None else _number(field.max)
        return where, f"{shown} is out of range {low}..{high}"
    if kind in ("not_a_number", "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing"):
        return where, f"must be {'an integer' if integers else 'a number'}, not {type(value).__name__}"
    if kind == "literal_error":
        return where, f"must be one of {', '.join(map(str, field.values))}"
    if kind == "string_type":
        return where, f"must be a string, not {type(value).__name__}"
    actual = ctx.get("actual_length", len(value) if isinstance(value, list) else 0)
    if field.type == "grid":
        if not loc:
            return where, (f"must be a list of {field.rows} rows" if kind == "list_type"
                           else f"must hold exactly {field.rows} rows, not {actual}")
        return where, (f"must be a list of {field.cols} integers" if kind == "list_type"
                       else f"must hold exactly {field.cols} values, not {actual}")
    if field.type == "edges":
        if loc:
            return where, "must be a pair [a, b] of two integers"
        if kind == "list_type":
            return where, "must be a list of pairs [a, b]"
        if kind == "too_short":
            return where, f"must hold at least {_plural(field.min_length, 'pair')}"
        return where, f"must hold at most {field.max_length} pairs, not {actual}"
    if kind == "list_type":
        return where, f"must be a list of {'integers' if integers else 'numbers'}"
    if field.length is not None:
        return where, f"must hold exactly {field.length} values, not {actual}"
    if kind == "too_short":
        return where, f"must hold at least {_plural(field.min_length, 'value')}"
    if kind == "too_long":
        return where, f"must hold at most {field.max_length} values, not {actual}"
    return where, error["msg"]  # a rule pydantic holds that no declaration sets: its own words


def refuse_shape(errors: list[dict], names: Iterable[str]) -> None:
    """FieldError for a body that is not a JSON object, or that holds a field not among `names` (the first of
    them), from a pydantic validation's errors: told before any field's own fault."""
    if any(not error["loc"] for error in errors):
        fail("body", "send a JSON object (Content-Type: application/json)")
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1)
    if unknown:
        fail(unknown[0], f"unknown field; the fields are {', '.join(sorted(names))}")


def request_type(fields: dict[str, Field]) -> TypeAdapter:
    """The request body's type (a TypedDict of the declared fields, none other): what validate() checks."""
    shape = TypedDict("Request", {name: (Required if field.required else NotRequired)[field.annotation()]
                                  for name, field in fields.items()}, total=False)
    shape.__pydantic_config__ = ConfigDict(extra="forbid")
    return TypeAdapter(shape)


def validate(body: Any, fields: dict[str, Field]) -> dict:
    """A JSON body checked against the declared fields by their pydantic type (request_type); the 400's message
    starts with the field at fault: an unknown field first, then the fields in their declared order, each at its
    shallowest fault (a list's length before its items)."""
    try:
        args = dict(_request_type(tuple(fields.items())).validate_python(body))
    except ValidationError as exc:
        errors = exc.errors()
        refuse_shape(errors, fields)
        order = list(fields)
        first = min(errors, key=lambda e: (order.index(e["loc"][0]), len(e["loc"]), e["loc"][1:]))
        if first["type"] == "missing":
            fail(first["loc"][0], "is required")
        fail(*_message(fields[first["loc"][0]], first))
    for name, field in fields.items():
        if name not in args and field.default is not None:
            args[name] = field.default
    for name, field in fields.items():
        if field.default_from and name not in args and field.default_from in args:
            args[name] = args[field.default_from]
    return args


@lru_cache(maxsize=256)
def _request_type(fields: tuple[tuple[str, Field], ...]) -> TypeAdapter:
    """request_type, made once for each endpoint's fields (a TypeAdapter takes milliseconds to build); the fields of
    catalogs that are no longer served leave as new ones come."""
    return request_type(dict(fields))


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
