"""The shape of every JSON answer of the API, as TypedDicts.

The functions that build an answer are annotated with these types, and the OpenAPI document's schemas are
generated from them (web/openapi.py), so the contract is written once. A lab kind declares the shapes of its
endpoints' results beside its code (`LabKind.results`). Keys are as on the wire: the stored manifest's are
camelCase because the seed's are.
"""

from functools import cache
from typing import Annotated, Literal, NotRequired

from annotated_types import Ge
from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic reads a TypedDict from here before Python 3.12

# The stored manifest is validated against its types below when it is loaded (schema.py), strictly and with no
# member they do not name: what the API's document says of a manifest is then true of every one it serves.
EXACT = ConfigDict(extra="forbid", strict=True)


@cache
def validator(shape) -> TypeAdapter:
    """The validator of one of these types (a stored manifest, a request body), made once: making one compiles its
    schema, a millisecond or two each time."""
    return TypeAdapter(shape)


class _RFC3339:
    """Marks a string as an RFC 3339 time (format date-time) in the generated schema."""

    @staticmethod
    def __get_pydantic_json_schema__(core_schema, handler) -> dict:
        return handler(core_schema) | {"format": "date-time"}


class _Minimum:
    """A least value, in the generated schema."""

    def __init__(self, least: int) -> None:
        self.least = least

    def __get_pydantic_json_schema__(self, core_schema, handler) -> dict:
        return handler(core_schema) | {"minimum": self.least}


Time = Annotated[str, _RFC3339()]  # every time of the API, in UTC
Status = Literal["passed", "failed"]
# A number that the comparison could not compute (a relative difference from a recorded zero) is null.
Ratio = float | None


# --- the stored manifest, served byte for byte --------------------------------------------------------------

class Paper(TypedDict):
    __pydantic_config__ = EXACT
    title: str
    url: NotRequired[str]


class Milestone(TypedDict):
    __pydantic_config__ = EXACT
    name: str
    year: int
    kind: str
    fidelity: str
    papers: list[Paper]


class InputSpec(TypedDict):
    """An example input as the recipe declared it: a shape with a fill, or the values themselves."""

    __pydantic_config__ = EXACT
    name: NotRequired[str]  # a keyword argument of forward(); positional when absent
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]  # float32 when absent
    fill: NotRequired[str]
    values: NotRequired[list]  # a rectangular array of numbers, nested as deep as it has dimensions
    madeBy: NotRequired[str]  # the model.py function that made it, where recipe.toml declares no inputs


class Inputs(TypedDict):
    __pydantic_config__ = EXACT
    args: list[InputSpec]


class Execution(TypedDict):
    __pydantic_config__ = EXACT
    inputs: Inputs
    device: str
    mode: str
    seed: int
    deterministic: bool


class RecordedCheckpoint(TypedDict):
    __pydantic_config__ = EXACT
    files: dict[str, str]  # each checkpoint file's sha256, by name


class RecordedOn(TypedDict):
    """The machine a recording was made on, as far as it decides how its sums round."""

    __pydantic_config__ = EXACT
    cpu: str
    vector_extensions: list[str]
    kernels: Literal["native", "avx2", "portable"]  # the kernel family it was told to use (recipekit/kernels.py)
    cpu_capability: str  # the kernels torch chose (AVX512, AVX2, DEFAULT, ...)
    os: str
    numpy: str


class Provenance(TypedDict):
    __pydantic_config__ = EXACT
    capturedAt: Time
    recorder: NotRequired[int]
    productRevision: NotRequired[str]
    sourceSha256: str
    python: str
    torch: str
    recordedOn: NotRequired[RecordedOn]
    execution: Execution
    outcome: str
    outputShape: list[int]
    method: str
    scope: str
    numericalChecks: list[str]
    checkpoint: NotRequired[RecordedCheckpoint | None]  # null: recorded without a checkpoint
    failedChecks: NotRequired[list[str]]  # a variant's: the checks it failed when recorded (what it did not learn)


class SourceSpan(TypedDict):
    __pydantic_config__ = EXACT
    line: int
    endLine: int


ParamValue = int | float | str | bool | None | list[int] | list[float] | list[str]


class Layer(TypedDict):
    __pydantic_config__ = EXACT
    id: str
    label: str
    op: str
    kind: Literal["input", "layer", "module", "output"]
    parent: str | None
    params: NotRequired[dict[str, ParamValue]]
    className: NotRequired[str]
    source: NotRequired[SourceSpan]
    callSource: NotRequired[SourceSpan]
    sharedParams: NotRequired[dict[str, list[str]]]  # a parameter shared with other modules' (tied weights)
    # A module called more than once (a recurrent cell, one call per step): each call is a node of its own.
    module: NotRequired[str]  # the module's name, shared by its calls
    call: NotRequired[Annotated[int, _Minimum(1)]]  # which call this node is, from 1
    calls: NotRequired[Annotated[int, _Minimum(1)]]  # how many calls the recording made


class Connection(TypedDict):
    __pydantic_config__ = EXACT
    id: str
    source: str
    target: str
    sourcePort: str | None
    targetPort: str | None


class Step(TypedDict):
    __pydantic_config__ = EXACT
    id: str
    target: str
    title: str
    note: str


class Envelope(TypedDict):
    """How far a recorded item may be from its replay: |replayed − recorded| <= atol + rtol·|recorded|, fitted when it
    was recorded to FACTOR times the farthest other roundings moved it (domain/envelopes.py), never below float32's."""

    __pydantic_config__ = EXACT
    rtol: Annotated[float, Ge(0)]
    atol: Annotated[float, Ge(0)]
    moved: Annotated[float, Ge(0)]  # the largest |Δ| of any element under the roundings it was measured with
    amplifies: bool  # whether rounding alone moved an element far past float32's tolerance (envelopes.AMPLIFIED)


class RecordedMatrix(TypedDict):
    __pydantic_config__ = EXACT
    key: NotRequired[str]  # the seed's items have none: their key is made from the label
    label: str
    values: list[list[float]]
    rows: NotRequired[list[str]]  # each row's name (a graph's members, a sampler's steps), where the recipe names them
    columns: NotRequired[list[str]]  # each column's name
    envelope: NotRequired[Envelope]  # run freely
    stepEnvelope: NotRequired[Envelope]  # in a case replayed step by step, from the recorded states


class RecordedVector(TypedDict):
    __pydantic_config__ = EXACT
    key: NotRequired[str]
    label: str
    values: list[float]
    first: NotRequired[int]  # the number of the first entry where it is not 0 (epochs and lengths count from 1)
    names: NotRequired[list[str]]  # each entry's name, where the recipe names them
    envelope: NotRequired[Envelope]
    stepEnvelope: NotRequired[Envelope]


class RecordedMetric(TypedDict):
    __pydantic_config__ = EXACT
    key: NotRequired[str]
    label: str
    value: float
    envelope: NotRequired[Envelope]
    stepEnvelope: NotRequired[Envelope]


class RecordedProcess(TypedDict):
    """An iterated process of a case (a diffusion chain, an episode, a generation, a recurrent scan): the state that
    entered each of its steps, flattened (float32's values exactly), from which a verification replays each step."""

    __pydantic_config__ = EXACT
    key: str  # the process's name, as the recipe gives it to recipekit.replay.step_state
    names: list[str]  # each step's name ("t = 100")
    states: list[list[float]]
    envelope: NotRequired[Envelope]  # the states of a free run
    stepEnvelope: NotRequired[Envelope]  # each state made from the recorded one before it


class Rounding(TypedDict):
    """How the envelopes of a recording were measured."""

    __pydantic_config__ = EXACT
    factor: float  # each envelope allows this many times the largest movement measured
    measuredBy: list[str]  # the other roundings the recipe was replayed under


class RecordedCase(TypedDict):
    __pydantic_config__ = EXACT
    id: str
    label: str
    target: NotRequired[str]
    note: NotRequired[str]
    matrices: NotRequired[list[RecordedMatrix]]
    vectors: NotRequired[list[RecordedVector]]
    metrics: NotRequired[list[RecordedMetric]]
    steps: NotRequired[list[RecordedProcess]]  # checked step by step as well as freely
    # The lab request that reproduces the case, where the recipe gave one (its preset).
    request: NotRequired[dict[str, int | float | str | bool | None | list[int] | list[float] | list[list[int]]]]


class StatedTolerance(TypedDict):
    __pydantic_config__ = EXACT
    rtol: float
    atol: float


class Experiment(TypedDict):
    __pydantic_config__ = EXACT
    kind: str
    title: str
    description: str
    controlLabel: NotRequired[str]
    cases: list[RecordedCase]
    tolerance: NotRequired[StatedTolerance]  # the floor of every envelope (float32's where none is stated)
    rounding: NotRequired[Rounding]


class RecordedFile(TypedDict):
    __pydantic_config__ = EXACT
    url: str
    sha256: str
    bytes: int


class Manifest(TypedDict):
    __pydantic_config__ = EXACT
    schemaVersion: Literal[1]
    slug: str
    title: str
    className: str
    question: str
    description: str
    category: str
    tags: list[str]
    curator: NotRequired[str]
    attribution: NotRequired[str]
    license: NotRequired[str]
    limitations: NotRequired[str]
    openingStep: NotRequired[str]
    provenance: Provenance
    layers: list[Layer]
    connections: list[Connection]
    steps: list[Step]
    milestone: Milestone
    experiment: Experiment
    revision: str
    files: dict[str, RecordedFile]


# --- the catalog and the files ------------------------------------------------------------------------------

class Links(TypedDict):
    self: str
    files: str
    verifications: str
    latest_verification: str
    verification_history: str
    page: str
    retrainings: NotRequired[str]  # where the recipe trains the model: POST to retrain it on the server


class CatalogEntry(TypedDict):
    slug: str
    title: str
    question: str
    category: str
    tags: list[str]
    revision: str
    milestone: Milestone
    links: Links


class Unavailable(TypedDict):
    slug: str
    reason: str


class Catalog(TypedDict):
    models: list[CatalogEntry]
    unavailable: list[Unavailable]


class FileEntry(TypedDict):
    name: str
    url: str
    content_type: str
    size: int
    sha256: str
    recorded_sha256: str | None
    recorded_size: int | None
    matches_recording: bool
    note: NotRequired[str]  # why a file differs from the recording where that is expected


class NotServed(TypedDict):
    name: str
    recorded_sha256: str | None
    note: str


class Files(TypedDict):
    model: str
    revision: str
    files: list[FileEntry]
    not_served: list[NotServed]


# --- verification -------------------------------------------------------------------------------------------

class Tolerance(TypedDict):
    rtol: float
    atol: float
    source: str
    rule: str


class ValueTolerance(TypedDict):
    """The rule one value was held to, and where it comes from: float32's defaults, the manifest's own, or the value's
    envelope, with what the recorder measured and what that means in words."""

    rtol: float
    atol: float
    source: str
    widened: bool  # wider than the report's tolerance: the recording measured rounding to move it further
    moved: NotRequired[float]  # the largest movement other roundings gave when it was recorded
    amplifies: NotRequired[bool]  # rounding alone moved it far past float32's tolerance
    note: NotRequired[str]


class StepwiseValue(TypedDict):
    """A value of a case replayed step by step from its recorded states, against the recording."""

    status: Status
    message: NotRequired[str]
    max_abs_diff: NotRequired[Ratio]
    worst_index: NotRequired[list[int]]
    failing_elements: NotRequired[int]
    worst_ratio: NotRequired[Ratio]
    tolerance: ValueTolerance


class FirstFailing(TypedDict):
    index: int  # the row of the recorded states that differs
    step: str  # the step that made it ("t = 64"), or "the starting state"


class StepsReport(TypedDict):
    """An iterated process replayed step by step: each state a step passed on against the recorded one."""

    key: str
    steps: int
    status: Status
    tolerance: ValueTolerance
    failing_steps: int
    max_abs_diff: Ratio
    worst_ratio: Ratio
    first_failing: NotRequired[FirstFailing]
    message: NotRequired[str]
    note: NotRequired[str]


class ValueReport(TypedDict):
    """One recorded matrix, vector or metric against its replay."""

    kind: Literal["matrix", "vector", "metric"]
    key: str
    label: str
    status: Status  # in a case checked step by step, passed only where it holds both ways
    tolerance: ValueTolerance
    stepwise: NotRequired[StepwiseValue]  # in a case checked step by step
    message: NotRequired[str]  # why it failed without numbers: no such item, another shape
    shape: NotRequired[list[int]]
    max_abs_diff: NotRequired[Ratio]
    max_rel_diff: NotRequired[Ratio]
    worst_index: NotRequired[list[int]]
    recorded_at_worst: NotRequired[Ratio]
    replayed_at_worst: NotRequired[Ratio]
    failing_elements: NotRequired[int]
    worst_ratio: NotRequired[Ratio]
    abs_diff: NotRequired[list[Ratio] | list[list[Ratio]]]  # each element's |replayed - recorded|
    allowance_ratio: NotRequired[list[Ratio] | list[list[Ratio]]]  # each element's |diff| / allowance


class CaseReport(TypedDict):
    id: str
    label: str
    status: Status
    message: NotRequired[str]
    values: list[ValueReport]
    steps: NotRequired[list[StepsReport]]  # its iterated processes, checked step by step


# What a recipe's check measured: numbers, flags, shapes, or those by part.
Measure = float | bool | str | None | list[int] | list[float]
CheckDetail = dict[str, Measure | dict[str, Measure]]


class CheckReport(TypedDict):
    name: str
    status: Status
    message: NotRequired[str]
    detail: NotRequired[CheckDetail]
    recorded: NotRequired[Literal[False]]  # a check the recipe ran that the recording does not name
    recorded_failed: NotRequired[Literal[True]]  # a variant's check that failed when recorded: it holds failing again


class Summary(TypedDict):
    cases: int
    cases_failed: int
    values: int
    values_failed: int  # off in the free run, or step by step
    values_widened: NotRequired[int]  # held to an envelope wider than the report's tolerance (rounding moves them)
    elements: int
    steps_checked: NotRequired[int]  # steps of iterated processes replayed one by one from their recorded states
    checks: int
    checks_failed: int


class Environment(TypedDict):
    """Where a recipe ran."""

    python: str
    torch: str
    numpy: str
    platform: str
    os: str
    cpu: str  # the processor's model name
    vector_extensions: list[str]  # those of worker.VECTOR_EXTENSIONS the processor has
    # The kernel family the process was told to use (recipekit/kernels.py): native (the processor's own), avx2 or
    # portable; absent from reports made before it was named.
    kernels: NotRequired[Literal["native", "avx2", "portable"]]
    cpu_capability: str  # the kernels torch chose on it (AVX2, AVX512, ...)
    torch_threads: int
    seed: int
    mode: Literal["eval", "train"]
    deterministic: bool
    device: str


class RecipeSummary(TypedDict):
    model_py_sha256: str
    run_py_sha256: str
    recorded_source_sha256: str | None
    matches_recorded_source: bool
    note: str


class CheckpointSummary(TypedDict):
    used: dict[str, str]  # the sha256 of each checkpoint file the replay read, by name
    recorded: dict[str, str] | None  # those the recording was made from
    matches_recording: bool
    note: str


class Report(TypedDict):
    """A verification: the recipe re-executed and every recorded value compared."""

    model: str
    status: Literal["passed", "failed", "error"]
    revision: NotRequired[str]
    manifest_sha256: NotRequired[str]
    started_at: NotRequired[Time]
    recipe: NotRequired[RecipeSummary]
    message: NotRequired[str]  # why it could not compare (status "error")
    tolerance: NotRequired[Tolerance]
    summary: NotRequired[Summary]
    cases: NotRequired[list[CaseReport]]
    checks: NotRequired[list[CheckReport]]
    environment: NotRequired[Environment]
    compute_seconds: NotRequired[float]
    replay_sha256: NotRequired[str]  # the digest of the replayed values' JSON: the same bytes, the same digest
    checkpoint: NotRequired[CheckpointSummary]
    duration_seconds: NotRequired[float]
    cached: bool


class JobState(TypedDict):
    """What every job tells a poller (services/jobs.py), whatever its kind."""

    id: str
    model: str
    state: Literal["queued", "running", "done"]
    location: str
    created_at: Time
    started_at: Time | None
    finished_at: Time | None
    heartbeat_at: Time  # the last sign of life from the process that runs it
    elapsed_seconds: float


class Job(JobState):
    """A verification job as a client polls it."""

    report: Report | None


class TrainingCurve(TypedDict):
    """One model's training as heard so far (a recipe may train several, each a run), epoch by epoch."""

    run: int  # which model of the recipe's training, from 1
    epochs: int  # the epochs (or episodes: the recipe's unit) it trains for
    unit: str  # "epoch", "episode"
    loss: list[float | None]  # the mean training loss of each epoch ended (None: no step in it, or not finite)
    metrics: dict[str, list[float]]  # held-out metrics measured after each epoch, by name, where the recipe measures


class RetrainingProgress(TypedDict):
    """Where a retraining is, and every curve so far."""

    run: int
    runs: int  # the models begun so far
    epoch: int
    epochs: int
    unit: str
    loss: float | None
    metrics: dict[str, float]
    curves: list[TrainingCurve]
    # What a watched training drew of its model as it learnt (a variant's: the decision regions), the latest, in the
    # shape of the recipe's lab answer (its matrices and vectors), where the recipe draws any.
    drawings: NotRequired[list["Drawing"]]


class Drawing(TypedDict):
    run: int
    epoch: int  # drawn after this many epochs (0: at initialisation)
    drawing: dict


class TensorComparison(TypedDict):
    """One retrained tensor against the stored one."""

    file: str
    name: str | None  # None: the stored file could not be read at all
    shape: list[int] | None
    largest_difference: float | None  # max |retrained - stored|; None where they cannot be compared (problem)
    identical: bool  # the same bits
    problem: str | None  # missing from either side, reshaped, unreadable, not finite


class FigureComparison(TypedDict):
    """One figure of a weights file's metadata (the held-out metric the training measured) measured again."""

    file: str
    name: str
    same: bool  # the same text, as stored
    values: int | None  # how many numbers it holds, where both sides are numbers
    largest_difference: float | None
    stored: float | None  # a single number's value on either side
    retrained: float | None


class Fact(TypedDict):
    name: str
    held: bool


class ElsewhereBound(TypedDict):
    weights: float  # how far a retraining on kernels that round otherwise may take the weights
    why: str


class BehaviourFigure(TypedDict):
    """A figure of what the model does (a held-out accuracy, a return), stored and retrained, against its bound."""

    name: str
    stored: float | None
    retrained: float | None
    difference: float | None
    allowed: float
    why: str
    held: bool


class RetrainingReport(TypedDict):
    """A retraining: the recipe's train.py run again on the server and its files compared with the stored ones."""

    model: str
    status: Literal["passed", "failed", "error", "cancelled"]
    started_at: NotRequired[Time]
    message: NotRequired[str]  # why it did not compare (status "error" or "cancelled")
    files: NotRequired[dict[str, str]]  # the sha256 of train.py and the weight files compared, by name
    summary: NotRequired[str]  # what the training measured, in its own words
    tolerance: NotRequired[float]  # the most any tensor may differ on the same kernels (RETRAIN_TOLERANCE)
    largest_difference: NotRequired[float | None]  # over every tensor; None where one could not be compared
    identical: NotRequired[int]  # tensors with the same bits
    # Which guarantee held (recipekit.training.compared): the same bits, the weights within `tolerance`, or, where
    # the kernels round otherwise, the weights within `elsewhere` and what the model does within `behaviour`.
    guarantee: NotRequired[Literal["same bits", "tolerance", "behaviour", "none"]]
    bound: NotRequired[float]  # the weights' bound that applied: `tolerance`, or `elsewhere`'s where behaviour did
    # Whether the stored weights were trained on this machine and torch (where only the same bits, or weights within
    # `tolerance`, pass); None where their metadata does not say.
    trained_here: NotRequired[bool | None]
    verdict: NotRequired[str]  # what the retraining showed, in words
    elsewhere: NotRequired[ElsewhereBound]
    behaviour: NotRequired[list[BehaviourFigure]]
    weights_sha256: NotRequired[str]  # the digest of every retrained tensor: the same bits, the same digest
    tensors: NotRequired[list[TensorComparison]]
    figures: NotRequired[list[FigureComparison]]
    facts: NotRequired[list[Fact]]  # what a retraining must reproduce besides the weights (the same test split)
    curves: list[TrainingCurve]
    environment: NotRequired[Environment]
    compute_seconds: NotRequired[float]
    duration_seconds: NotRequired[float]
    cached: bool


class RetrainingJob(JobState):
    """A retraining job as a client polls it: the curves so far while it trains, its report once done."""

    progress: RetrainingProgress | None
    report: RetrainingReport | None
    # In the POST's answer to the client that started it, and never again: the token that cancels it (DELETE with
    # Authorization: Bearer <token>). A client that joined a running retraining has none.
    cancel_token: NotRequired[str]


KnobValue = float | int | str


class VariantRequest(TypedDict):
    """The knobs to train a variant with; each not given keeps its default (GET .../variants lists them)."""

    __pydantic_config__ = EXACT
    knobs: NotRequired[Annotated[dict[str, KnobValue], Field(description="Knob names and their values.")]]


class Variant(TypedDict):
    """A learner's variant of a model: trained with its knobs, recorded from its weights and served at `page` and
    `manifest` as a model of its own, for as long as it is kept."""

    model: str
    id: str  # 16 hex digits: the recipe's files, torch and every knob's value name it
    knobs: dict[str, KnobValue]  # every knob's value it trained with
    moved: dict[str, KnobValue]  # those not at their default
    created_at: Time
    train_seconds: float
    record_seconds: float
    bytes: int  # its files, as kept
    page: str
    manifest: str
    verifications: str


class VariantReport(TypedDict):
    """How a variant's job ended: made (with the variant), or why not."""

    model: str
    id: str
    knobs: dict[str, KnobValue]
    moved: dict[str, KnobValue]
    status: Literal["made", "error", "cancelled"]
    message: NotRequired[str]
    variant: NotRequired[Variant]
    cached: bool


class VariantJob(JobState):
    """A variant's job as a client polls it: the curves and pictures so far while it trains, then its report."""

    progress: RetrainingProgress | None
    stage: Literal["recording"] | None  # after its training, while the recorder records it
    report: VariantReport | None
    # In the POST's answer to the client that started it, and never again: the token that cancels it (DELETE with
    # Authorization: Bearer <token>).
    cancel_token: NotRequired[str]


class KnobDeclared(TypedDict):
    name: str
    description: str
    default: KnobValue
    minimum: float | None
    maximum: float | None
    step: float | None
    choices: list[str]


class Variants(TypedDict):
    model: str
    knobs: dict[str, KnobDeclared]
    variants: list[Variant]


Said = Annotated[str, Field(max_length=200)]  # a short text a reader's verifier reports


class NamedEnvironment(TypedDict):
    """What names an environment in a history (history.ENVIRONMENT_KEYS): what decides how its sums round."""

    __pydantic_config__ = EXACT
    python: Said
    torch: Said
    numpy: Said
    os: Said
    cpu: Said
    vector_extensions: Annotated[list[Said], Field(max_length=40)]
    kernels: NotRequired[Said]
    cpu_capability: Said
    torch_threads: Annotated[int, Field(ge=1, le=4096)]
    device: Said


class SharedEntry(TypedDict):
    """A report a reader's verifier made (`tensorviz verify --share`), as it posts it: history.verification_entry's
    or retraining_entry's fields but those the server sets itself."""

    __pydantic_config__ = EXACT
    kind: Literal["verification", "retraining"]
    status: Literal["passed", "failed"]
    revision: Annotated[str, Field(max_length=64)]
    environment: NamedEnvironment
    # the largest |replayed - recorded| (or weight difference) of any value: a finite number from 0 to 1e6
    largest_deviation: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] | None
    values: Annotated[int, Field(ge=0, le=10_000_000)]
    values_failed: Annotated[int, Field(ge=0, le=10_000_000)]
    digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None  # the sha256 of the replayed values' JSON


class HistoryEntry(TypedDict):
    """One report in a model's history."""

    kind: Literal["verification", "retraining"]
    reported_by: Literal["server", "client"]  # the server's own, or posted by a reader's verifier
    at: Time  # when the server kept it
    status: Literal["passed", "failed"]
    revision: str | None
    environment: NamedEnvironment
    environment_id: str
    largest_deviation: float | None
    values: int
    values_failed: int
    digest: str | None


class HistoryEnvironment(TypedDict):
    """One environment a model was verified or retrained in, by whom, and how far from the recording. A reader's is
    their claim: what they posted, which the server cannot check."""

    id: str
    reported_by: Literal["server", "client"]
    environment: NamedEnvironment
    reports: int
    failed: int
    last_at: Time
    largest_deviation: dict[str, float]  # by kind, on the current revision


class Drift(TypedDict):
    """How far two environments' latest replays (or retrained weights) of the current revision are apart: between the
    server's own environments only, whose reports it made itself (a reader's digest is a claim it cannot check)."""

    kind: Literal["verification", "retraining"]
    a: str
    a_reported_by: Literal["server", "client"]
    b: str
    b_reported_by: Literal["server", "client"]
    identical: bool  # the same bytes
    at_most: float | None  # 0 when identical, else the sum of their deviations from the recording


class History(TypedDict):
    """A model's verification history: its environments, the drift between them, its entries (newest first)."""

    model: str
    revision: str
    limit: int  # the most entries kept of the server's, and of readers'
    environments: list[HistoryEnvironment]
    drift: list[Drift]
    entries: list[HistoryEntry]


# --- live answers -------------------------------------------------------------------------------------------

class CheckpointProbe(TypedDict):
    """What a DataLab found reading its own probe inputs with the checkpoint's weights (recipekit.checkpoints.probe)."""

    looks_untrained: bool
    measured: float
    rule: str  # what was measured
    note: str  # in words

RequestValue = int | float | str | bool | None | list[int] | list[list[int]]


class Live(TypedDict):
    """What every live answer carries: what ran, where, and whether it was kept from an earlier run. Each lab
    endpoint's `request` is described by its own fields in the document."""

    model: str
    revision: str
    recorded: Literal[False]
    note: str
    request: dict[str, RequestValue]
    environment: Environment
    compute_seconds: float
    cached: bool
    # Where the model reads a checkpoint: what its weights are, where this server knows them by their sha256
    # (the declared package's, the project's own), else None, and that said in words.
    checkpoint_recognised: NotRequired[str | None]
    checkpoint_note: NotRequired[str]


class LabAnswer(Live):
    kind: str  # the lab endpoint that answered
    # What the model answered, whether it is right and how sure, in one sentence (the lab kind reads the case, or a
    # DataLab's trace); absent where the kind does not read this answer
    outcome: NotRequired[str]


class Token(TypedDict):
    id: NotRequired[int]  # a token's id; a row or column the recording names has none
    name: str


class AxisTitles(TypedDict):
    rows: str
    columns: str


class Axes(TypedDict):
    """What a matrix's rows and columns are; an axis left out keeps its numbers."""

    rows: NotRequired[list[Token]]
    columns: NotRequired[list[Token]]
    titles: NotRequired[AxisTitles]  # what the rows and the columns are (an attention map's queries and keys)
    numbered: NotRequired[bool]  # false: the rows and columns are a plane's picture, drawn without their numbers


class Matrix(TypedDict):
    key: str
    label: str
    values: list[list[float | None]]
    rows: NotRequired[list[str]]  # each row's name, where the recipe names them (as a recorded matrix's)
    columns: NotRequired[list[str]]  # each column's name


class Vector(TypedDict):
    key: str
    label: str
    values: list[float | None]
    first: NotRequired[int]  # the number of the first entry where it is not 0 (epochs and lengths count from 1)
    names: NotRequired[list[str]]  # each entry's name, where the recipe names them


class Metric(TypedDict):
    key: str
    label: str
    value: float | None


class LiveCase(TypedDict):
    id: Literal["live"]
    label: str
    matrices: list[Matrix]
    vectors: list[Vector]
    metrics: list[Metric]


class RecordCheck(TypedDict):
    """A live case compared with the recorded case it should reproduce, by the verification's rule."""

    id: str
    label: str
    status: Status
    message: NotRequired[str]
    values: list[ValueReport]
    tolerance: Tolerance


class GroupMap(TypedDict):
    key: str  # the matrix's key in the case
    index: int  # its number in the group: a channel, a head


class CaseGroup(TypedDict):
    """Matrices a page draws together (the lab's `groups`), in the order they come."""

    key: str
    title: str
    each: NotRequired[str]  # what one of them is: "channel" when not said
    over: NotRequired[str]  # the key of the matrix each is drawn over
    scale: Literal["shared", "own"]  # one colour scale for the group, or each map on its own
    ink: NotRequired[float]  # its maps are pictures in grey levels, drawn as ink on paper: full ink's value
    maps: list[GroupMap]


class CaseAnswer(LabAnswer):
    """An endpoint that answers a case, in the recording's own shape."""

    case: LiveCase
    axes: dict[str, Axes]  # by matrix key, where the lab kind knows; other matrices have numbered axes
    groups: list[CaseGroup]  # the matrices drawn together, as the recorded cases' pages draw them
    record_check: NotRequired[RecordCheck]


Value = float | None | list[float | None] | list[list[float | None]]  # a metric, a vector or a matrix


class Change(TypedDict):
    kind: Literal["matrix", "vector", "metric"]
    label: str
    before: Value
    after: Value
    delta: Value  # after - before
    names: NotRequired[list[str]]  # a vector's entries by name (the recipe's, or the tokens it holds), where known
    axes: NotRequired[Axes]  # a matrix's rows and columns by name (an attention map's tokens), where known


class Outcomes(TypedDict):
    """What the model answered before the interventions and after them, each in the sentence its lab kind writes (a
    recorded case's outcome); None where the kind does not read the answer."""

    before: str | None
    after: str | None


Action = Literal["zero", "mean", "scale", "patch"]  # what an intervention does to a node's output (the one list)


MOST_INTERVENTIONS = 16  # in one request
FACTOR = 1e6  # the largest |factor| a scale takes: beyond it, outputs overflow float32 soon


# A request's interventions, and the bodies below, are validated against their types (strictly: a number is not a
# string, a head not a boolean) before they are checked against the recording (domain/interventions.py,
# services/subjects.py): the schema the document gives them is what is checked.
class Intervention(TypedDict):
    """One change to the run: a module node of the recorded graph (not an op), or one head of an attention module
    the recipe declares, zeroed, replaced by its mean over positions, scaled by a factor, or patched with its
    output on another recorded case."""

    __pydantic_config__ = EXACT
    node: str
    action: Action
    head: NotRequired[Annotated[int, Ge(0)]]
    factor: NotRequired[Annotated[float, Field(allow_inf_nan=False, ge=-FACTOR, le=FACTOR)]]  # for scale
    from_case: NotRequired[str]  # for patch: the recorded case whose output replaces this one's


Interventions = Annotated[list[Intervention], Field(min_length=1, max_length=MOST_INTERVENTIONS)]


# Exactly one of case and request (a 400 otherwise): said in words, as generated clients read a oneOf of `required`
# alone as a body of any shape.
class SubjectRequest(TypedDict):
    """What to run: a recorded case or a request of a lab endpoint, and the endpoint to run it on."""

    __pydantic_config__ = EXACT
    case: NotRequired[Annotated[str, Field(description="A recorded case (or send request, not both).")]]
    request: NotRequired[Annotated[dict, Field(description="A request of the lab endpoint (or send case); described "
                                                           "under that endpoint's path.")]]
    endpoint: NotRequired[Annotated[str, Field(description="The lab endpoint to run; by default the one that "
                                                           "answers a case.")]]


class InterventionRequest(SubjectRequest):
    """What to run, and the interventions to run it with."""

    interventions: Interventions


class Intervened(Live):
    """A run as asked and with its interventions: for a case endpoint every item before, after and their
    difference; for another endpoint both answers whole and their difference number by number."""

    endpoint: str | None  # the lab endpoint that ran; None where run.py replayed the case (no preset makes it)
    case: str | None
    case_label: NotRequired[str]  # the recorded case's label, as its page names it
    interventions: list[Intervention]
    outcome: NotRequired[Outcomes]  # for a case endpoint: the answer before and after, in words
    items: NotRequired[dict[str, Change]]
    before: NotRequired[dict]
    after: NotRequired[dict]
    delta: NotRequired[dict]
    effects: dict[str, float | None]  # by module node: |after - before| / |before| of its output
    plain_run_cached: bool  # the run as asked came from those the recipe process keeps: the changed run alone ran


class NodeOptions(TypedDict):
    """What an intervention can do to one node of the run, and why not the rest."""

    actions: list[Action]  # those that run (a result a later part refuses: a 400)
    from_cases: list[str]  # the other recorded cases a patch may take this node's output from
    why_not: dict[str, str]  # each action not offered, and why, in words


class InterventionOptions(TypedDict):
    """What What if? can change on a recorded case or a lab request, by every module node of the graph."""

    endpoint: str | None  # the lab endpoint that runs it; None where run.py replays the case
    case: str | None
    nodes: dict[str, NodeOptions]


class ItemName(TypedDict):
    kind: Literal["matrix", "vector", "metric"]
    label: str


class Stage(TypedDict):
    id: str
    label: str
    values: NotRequired[dict[str, Value]]  # a case endpoint's items by key
    result: NotRequired[dict]  # another endpoint's answer
    weights: dict[str, float | None]  # by module holding parameters: ||w - w0|| / ||w0||
    activations: dict[str, float | None]  # by module node: ||a - a0|| / ||a0|| on this input


class Stages(Live):
    """A run on every stage of weights kept while the model trained, first the initialisation, last the
    trained weights."""

    endpoint: str | None  # as Intervened's
    case: str | None
    items: NotRequired[dict[str, ItemName]]
    stages: list[Stage]


class ActivationsRequest(SubjectRequest):
    """What to run, and the one node to draw large (else every node small)."""

    node: NotRequired[Annotated[str, Field(description="A node of the graph to draw large, alone.")]]


class NodeDrawing(TypedDict):
    """One output drawn within a bound, by its shape: feature maps (channels × side × side), a heatmap (rows ×
    columns), bars, a value, or integers (token ids). `of` is the output's whole shape; `pooled`, whether what is
    drawn was averaged down from it; `low` and `high`, its least and greatest finite values."""

    kind: Literal["maps", "heatmap", "bars", "value", "ids"]
    values: list[float | int | None]  # row-major, in `shape`; None where not finite
    of: list[int]
    pooled: bool
    shape: NotRequired[list[int]]
    low: NotRequired[float]
    high: NotRequired[float]


class NodeActivation(TypedDict):
    """What one node computed on this input: its output's shape, its input's, how often it ran, and its drawing."""

    shape: list[int]
    calls: int
    input_shape: NotRequired[list[int]]
    drawing: NotRequired[NodeDrawing]  # absent past the answer's bound of numbers
    from_part: NotRequired[str]  # a container never called itself: the last of its parts the run reached


class Activations(Live):
    """Every node the run reaches (or the one asked for), by graph node: what it computed on this input."""

    endpoint: str | None  # as Intervened's
    case: str | None
    node: str | None
    nodes: dict[str, NodeActivation]


class ErrorBody(TypedDict):
    status: int
    name: str
    message: str


class Error(TypedDict):
    error: ErrorBody
