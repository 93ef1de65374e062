"""The interface of a lab kind. A kind is a folder under app/domain/labs/ holding these files:

    __init__.py   a LabKind subclass, instantiated as KIND: what the kind requires of a declaration, what
                  its page reads from each endpoint's result, and its defaults, presets and axes
    lab.html      the panel's template (extends labs/_lab.html), served as labs/<name>.html
    lab.js        the ES module that draws it, served as js/labs/<name>.js beside js/labs/common.js
    lab.css       where the kind has styles of its own, served as css/labs/<name>.css and linked by its pages
                  alone (what kinds share stays in static/css/site.css)
    shapes.py     the TypedDicts of its endpoints' results (an endpoint that answers a case has the case's
                  shape), from which the API's document describes them

The registry (labs/__init__.py) finds the kinds by their folders; nothing else names one.
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .fields import DeclarationError


@dataclass(frozen=True)
class Reads:
    """What a kind's page reads from one endpoint's result: its top-level keys, the ids of its `stages`,
    and, for an answer that is a case, the keys of the case's items. A key ending in `*` is a prefix that
    at least one key must start with (`attention_head_*`)."""

    keys: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    items: tuple[str, ...] = ()

    def missing(self, result: dict) -> list[str]:
        """What the result lacks of what the page reads, worded for a message."""
        found = []
        for part, wanted, present in (
                ("key", self.keys, set(result) if isinstance(result, dict) else set()),
                ("stage", self.stages, {s.get("id") for s in result.get("stages", []) if isinstance(s, dict)}),
                ("item", self.items, {i["key"] for p in ("vectors", "matrices", "metrics")
                                      for i in result.get(p, []) if isinstance(i, dict) and "key" in i})):
            found += [f"{part} {w!r}" for w in wanted if not _has(present, w)]
        return found


def _has(present: set, wanted: str) -> bool:
    if wanted.endswith("*"):
        return any(isinstance(p, str) and p.startswith(wanted[:-1]) for p in present)
    return wanted in present


def check_names(spec, size: str, what: str) -> None:
    """Names, where a declaration gives them, name every one of the `size` things (`what`: tokens, classes)."""
    if spec.names and len(spec.names) != spec.sizes[size]:
        raise DeclarationError(f"lab.names lists {len(spec.names)} {what}; lab.sizes.{size} is {spec.sizes[size]}")


def check_sequence_field(spec, kind: str, field: str) -> None:
    """The runs endpoint takes a sequence of token ids under `field`; token names, where given, name every token of
    the vocabulary (the recurrent, seq2seq and state-space kinds)."""
    found = spec.endpoints["runs"].fields.get(field)
    if found is None or found.type != "ints":
        raise DeclarationError(f"lab.endpoints.runs of a {kind} lab needs a `{field}` field of ints")
    check_names(spec, "vocab", "tokens")


class LabKind:
    """A lab kind: the parts of a [lab] declaration it requires, what its page reads, and what depends on
    the kind (defaults between fields, presets from recorded cases, the axes of a case's matrices)."""

    name: ClassVar[str]
    requires: ClassVar[dict[str, tuple[str, ...]]] = {}  # by part of the declaration ("sizes", "endpoints")
    reads: ClassVar[dict[str, Reads]] = {}  # by endpoint: what the kind's page reads from its result
    results: ClassVar[dict[str, type]] = {}  # by endpoint that answers a result, not a case: its TypedDict
    # By endpoint and field: a limit that depends on another field (prepare checks it), for the API's document.
    limits: ClassVar[dict[str, dict[str, str]]] = {}
    # The keys of a recorded case's vectors that hold token ids: its page shows each token by its name.
    token_vectors: ClassVar[tuple[str, ...]] = ()
    # The endpoints whose results (not cases) the kind reads an outcome from (result_outcome): a DataLab's trace.
    says_outcome: ClassVar[tuple[str, ...]] = ()
    # Whether its page draws a variant's pictures as it trains (the decision plane's regions): such a page has the
    # "Train your own" panel beside its lab.
    watches_training: ClassVar[bool] = False

    @property
    def folder(self) -> Path:
        return Path(sys.modules[type(self).__module__].__file__).parent

    @property
    def template(self) -> str:
        return f"labs/{self.name}.html"

    @property
    def script(self) -> str:
        return f"js/labs/{self.name}.js"

    @property
    def style(self) -> str | None:
        """The name its own stylesheet is served under; None for a kind with none."""
        return f"css/labs/{self.name}.css" if (self.folder / "lab.css").is_file() else None

    def files(self) -> dict[str, Path]:
        """The kind's template, ES module and stylesheet, by the name each is served under."""
        files = {self.template: self.folder / "lab.html", self.script: self.folder / "lab.js"}
        return files | ({self.style: self.folder / "lab.css"} if self.style else {})

    def check(self, spec) -> None:
        """What the kind checks of a declaration beyond `requires`; DeclarationError says what is wrong."""

    def prepare(self, endpoint: str, args: dict, spec) -> dict:
        """Defaults that depend on other fields, and checks across fields (FieldError names the field)."""
        return args

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the request that replays it: {"id", "label", "request"}, and "endpoint" where the
        lab has several endpoints that answer cases (else the request is for whichever takes its fields)."""
        return []

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """What the rows and columns of a case's matrices are, by matrix key, where the kind knows."""
        return {}

    def vector_names(self, case: dict, spec) -> dict[str, list[str]]:
        """What each entry of a case's vectors is, by key, where the kind knows: the tokens a token vector holds
        (`token_vectors`), and the vocabulary's words along a distribution over it (a vector of the vocabulary's
        length that is not of token ids)."""
        found = {}
        vocab = spec.sizes.get("vocab")
        for vector in case.get("vectors", []):
            key, values = vector.get("key"), vector.get("values")
            if not isinstance(values, list) or key is None:
                continue
            if key in self.token_vectors:
                found[key] = [spec.token_name(t) for t in values]
            elif vocab and len(values) == vocab and not all(isinstance(v, int) for v in values):
                found[key] = spec.token_names()
        return found

    def settings(self, spec) -> dict:
        """What the kind's ES module reads beside the declaration (lab_settings): a rule the server also applies
        (a threshold, the arrow of each move), stated once here rather than again in JavaScript."""
        return {}

    def result_outcome(self, endpoint: str, args: dict, result: dict, spec) -> str | None:
        """The outcome of a live answer that is no case (an endpoint of `says_outcome`), in the words its recorded
        case's outcome uses; None where there is none to say."""
        return None

    def outcome(self, case: dict, spec) -> str | None:
        """What the model answered in this case (a recorded one or a live run's), whether that is right and how sure,
        in one sentence a learner reads first; None where the case is not one the kind reads (a training curve)."""
        return None

    def example(self, endpoint: str, presets: list[dict], spec) -> dict | None:
        """A request for the endpoint, for the recorder to check its result against `reads`: the first preset's
        request for it (a preset that names no endpoint is for any), restricted to the endpoint's fields; None
        when there is none."""
        found = next((p for p in presets if p.get("endpoint", endpoint) == endpoint), None)
        if found is None:
            return None
        fields = spec.endpoints[endpoint].fields
        return {k: v for k, v in found["request"].items() if k in fields}
