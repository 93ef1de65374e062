"""The messages between a web process and a recipe process: the call it is sent (RecipeCall, its arguments typed by
the kind of call), a warm-up (Warmup), and the reply (Reply when the call ran, Failure when it did not).

Each travels as plain data, over a pipe or as Celery's JSON (and a reply is kept in the cache as it came): `wire()`
writes it, `read()` (read_reply for a reply) reads it once where it arrives, so that nothing past that reads the
wire's keys."""

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..domain.jsonbytes import loads
from ..domain.steps import Step


def plain_key(run_key: str, entry: str, asked: dict) -> str:
    """What the plain run an intervention made is found by in its recipe process, for the next change to the same
    input: the service's run key (the recipe's content, the checkpoint, torch, the seed), the lab entry, and the
    request with the server's arguments."""
    return f"{run_key}:{entry}:{json.dumps(asked, sort_keys=True)}"


class _Arguments:
    """What every kind of typed arguments is read with: its fields from their plain data."""

    @classmethod
    def read(cls, data: dict):
        return cls(**data)


@dataclass(frozen=True)
class InterveneArgs(_Arguments):
    """An intervention's arguments: the lab request run as asked (`args`) and again with its planned `steps`;
    `sources` the requests whose runs patches take their tensors from, `root` the recorded model's class, `key` the
    service's run key, under which the plain runs are kept ("" keeps none)."""

    MODULE: ClassVar[str] = "intervene"
    args: dict
    steps: list[Step]
    sources: list[dict]
    root: str
    key: str = ""

    @classmethod
    def read(cls, data: dict) -> "InterveneArgs":
        return cls(**data | {"steps": [Step(**step) for step in data["steps"]]})


@dataclass(frozen=True)
class OutlineArgs(_Arguments):
    """An outline's arguments: the requests whose runs are outlined node by node (the first the one to be changed,
    the others patch sources), `root` and `key` as an intervention's."""

    MODULE: ClassVar[str] = "outline"
    requests: list[dict]
    root: str
    key: str = ""


@dataclass(frozen=True)
class ActivationsArgs(_Arguments):
    """What every node computes on one request: the lab request (`args`), the recorded model's class (`root`), the
    module each of the model's inputs enters (`inputs`, by input node), every input node in the order of the
    model's arguments (`arguments`), and the one node drawn large, if any."""

    MODULE: ClassVar[str] = "activations"
    args: dict
    root: str
    inputs: dict[str, str]
    arguments: list[str]
    node: str | None = None


@dataclass(frozen=True)
class TrainingArgs(_Arguments):
    """The arguments of a run on each stage of training: the lab request, and the recorded model's class, whose
    weights are swapped."""

    MODULE: ClassVar[str] = "training"
    args: dict
    root: str


@dataclass(frozen=True)
class ReplayArgs(_Arguments):
    """A replay's arguments: the recorded states of each case's iterated processes (by case id, by process, the states
    that entered its steps), from which those cases are replayed again step by step after the free replay (none: no
    case is); `nudge`, for the recorder's measurement of rounding, the seed of a small random change to every module's
    output (compute/rounding.py)."""

    MODULE: ClassVar[str] = "replay"
    states: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    nudge: int | None = None


@dataclass(frozen=True)
class CaptureArgs(_Arguments):
    """A capture's arguments: the recording's declared inputs (None: the recipe's own example inputs)."""

    MODULE: ClassVar[str] = "capture"
    inputs: list | None


Arguments = InterveneArgs | OutlineArgs | ActivationsArgs | TrainingArgs | ReplayArgs | CaptureArgs
ARGUMENTS: dict[str, type[Arguments]] = {kind.MODULE: kind for kind in
                                         (InterveneArgs, OutlineArgs, ActivationsArgs, TrainingArgs, ReplayArgs,
                                          CaptureArgs)}


@dataclass(frozen=True)
class RecipeCall:
    """What a recipe process is asked to run: the recipe's replay (run.py), one of its lab entries (lab.py), that
    entry with interventions, outlined or on the weights kept during training, or a capture of its graph. `args` is
    the client's request for a run.py or lab.py entry, else the call's typed Arguments. `context` holds the
    server's own arguments (a checkpoint folder), never a client's; the recipe process checks that the entry is one
    the recipe declares."""

    recipe_dir: Path
    module: str
    entry: str
    args: dict | Arguments = field(default_factory=dict)
    context: dict = field(default_factory=dict)

    @classmethod
    def replay(cls, recipe_dir: Path, context: dict | None = None, states: dict | None = None,
               nudge: int | None = None) -> "RecipeCall":
        """run.py's replay(): every recorded case and check, computed again; then the cases whose recorded `states`
        are given replayed step by step from them (ReplayArgs)."""
        return cls(Path(recipe_dir), ReplayArgs.MODULE, "replay", ReplayArgs(states or {}, nudge), context or {})

    @classmethod
    def lab(cls, recipe_dir: Path, entry: str, args: dict | None = None, context: dict | None = None) -> "RecipeCall":
        """A lab.py function that the recipe's [lab] declaration names."""
        return cls(Path(recipe_dir), "lab", entry, args or {}, context or {})

    @classmethod
    def make(cls, recipe_dir: Path, entry: str, arguments: Arguments, context: dict | None = None) -> "RecipeCall":
        """A lab.py entry (or a recorded case replayed) run as its `arguments` say: intervened, outlined, on each
        stage of training, or the graph's capture."""
        return cls(Path(recipe_dir), arguments.MODULE, entry, arguments, context or {})

    def wire(self) -> dict:
        """The call as plain data."""
        args = asdict(self.args) if is_dataclass(self.args) else self.args
        return {"recipe_dir": str(self.recipe_dir), "module": self.module, "entry": self.entry, "args": args,
                "context": self.context}

    @classmethod
    def read(cls, task: dict) -> "RecipeCall":
        """A call from its plain data: its arguments typed by its module."""
        kind, args = ARGUMENTS.get(task["module"]), task.get("args", {})
        return cls(Path(task["recipe_dir"]), task["module"], task["entry"], kind.read(args) if kind else args,
                   task.get("context", {}))

    def asked(self, request: dict) -> dict:
        """A request as the entry is called with it: the server's own arguments added."""
        return {**request, **self.context}

    def plain_key(self, request: dict, run_key: str) -> str | None:
        """Where the plain run of `request` is kept under `run_key`; None where that is ""."""
        return plain_key(run_key, self.entry, self.asked(request)) if run_key else None


@dataclass(frozen=True)
class SharedRunsFolder:
    """Where every recipe process of a machine shares the plain runs it keeps for What if? (compute/shared_runs.py),
    and the most its files may take in all: a setting handed to each process that runs recipes."""

    path: str
    max_bytes: int

    @classmethod
    def configured(cls, settings: Mapping[str, Any]) -> "SharedRunsFolder | None":
        """The folder SHARED_RUNS_DIR names ("": this user's folder among the machine's temporary files, in memory
        where the machine has /dev/shm), or None where it is None: each recipe process keeps its runs to itself."""
        folder = settings.get("SHARED_RUNS_DIR")
        if folder is None:
            return None
        if folder == "":
            memory = Path("/dev/shm")
            folder = (memory if memory.is_dir() else Path(tempfile.gettempdir())) / f"tensorviz-runs-{os.geteuid()}"
        return cls(str(folder), int(settings["SHARED_RUNS_MAX_BYTES"]))


@dataclass(frozen=True)
class Warmup:
    """A recipe's warm-up in a recipe process: its modules imported and the function its [lab] warm names called
    with the server's arguments (`warm`; "" to import only)."""

    recipe_dir: str
    warm: str = ""
    context: dict = field(default_factory=dict)

    def wire(self) -> dict:
        """The warm-up as plain data."""
        return {"warm": self.warm, "recipe_dir": self.recipe_dir, "context": self.context}

    @classmethod
    def read(cls, task: dict) -> "Warmup":
        """A warm-up from its plain data."""
        return cls(task["recipe_dir"], task["warm"], task.get("context", {}))


def is_warmup(task: dict) -> bool:
    """Whether plain data a recipe process received is a warm-up rather than a RecipeCall."""
    return "warm" in task


@dataclass(frozen=True)
class Reply:
    """A recipe process's answer to a call that ran: its result as the JSON text the process wrote (`result_json`,
    passed on as it is), whether that is finite JSON (NaN and infinity are written as NaN and Infinity otherwise)
    and its top-level keys where it is an object, the environment it ran in and how long the recipe computed."""

    result_json: str
    finite: bool
    keys: list[str] | None
    environment: dict
    compute_seconds: float

    @cached_property
    def result(self) -> Any:
        """The result read, for those that work with it rather than pass it on."""
        return loads(self.result_json)

    def wire(self) -> dict:
        return {"ok": True, **asdict(self)}


@dataclass(frozen=True)
class Failure:
    """Why a call, a warm-up or a retraining did not answer: the exception (`error`, `traceback`, for the server's
    log), what went wrong in words a reader can use (`words`), and where the recipe refused the request how
    (`refused`: "request", the request is wrong; "unavailable", the recipe cannot serve any) and its own message,
    or that it ran past its time limit (`timed_out`) or was cancelled."""

    error: str
    words: str
    traceback: str = ""
    refused: Literal["request", "unavailable"] | None = None
    message: str = ""
    timed_out: bool = False
    cancelled: bool = False

    def wire(self) -> dict:
        return {"ok": False, **asdict(self)}


def read_reply(data: dict) -> Reply | Failure:
    """A reply from its plain data."""
    fields = {k: v for k, v in data.items() if k != "ok"}
    return Reply(**fields) if data["ok"] else Failure(**fields)
