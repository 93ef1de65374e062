"""Lab kinds: one folder per kind behind a small registry, so that the core names no model.

A recipe declares its lab in `recipe.toml` under [lab]: the kind, sizes read from the recorded graph,
special tokens, token names, the words its page uses for the recipe's things, and its endpoints with their
request fields (the groups a case's matrices are drawn in are the recipe's [display], which the lab reads
too). The kind (a folder: see labs/kind.py) brings what is particular to it: its template and ES module, the
parts of the declaration it requires, what its page reads from each endpoint's result, how a recorded case
becomes a preset request, what the axes of a case's matrices are, and defaults that depend on other fields.
"""

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path

from .cases import metrics
from .fields import BODY_ONLY, DeclarationError, Field, declared_field
from .kind import LabKind


def held_out(case: dict, thing: str | None) -> str | None:
    """A held-out split's score in words, from the metrics the recipes record (`test_accuracy`, or a whole answer's
    `test_exact_match` or `test_string_accuracy`, with `test_size`): "Right on 353 of the 360 held-out digits
    (98.1%)."; None for another case."""
    found = metrics(case)
    size = found.get("test_size")
    exact = found.get("test_exact_match", found.get("test_string_accuracy"))  # a whole answer right
    share = found.get("test_accuracy", exact)
    if not isinstance(size, int | float) or not isinstance(share, int | float) or size <= 0:
        return None
    right = round(share * size)
    how = "Right" if "test_accuracy" in found else "Exactly right"
    return f"{how} on {right:,} of the {int(size):,} held-out {thing or 'case'}s ({100 * share:.1f}%)."


def found_kinds() -> dict[str, LabKind]:
    """Every kind, by name: each package beside this module is one (its KIND). A new kind is a new folder."""
    kinds = (importlib.import_module(f"{__name__}.{module.name}").KIND
             for module in pkgutil.iter_modules(__path__) if module.ispkg)
    return {kind.name: kind for kind in sorted(kinds, key=lambda kind: kind.name)}


KINDS: dict[str, LabKind] = found_kinds()
METHODS = ("GET", "POST")


@dataclass(frozen=True)
class Endpoint:
    """`/api/models/<slug>/<name>`: which recipe function answers it and what it accepts."""

    name: str
    method: str
    entry: str
    summary: str
    fields: dict[str, Field]
    answers: str = "result"  # "case": the result is a case, answered under "case" and comparable with a recording


@dataclass(frozen=True)
class LabSpec:
    """A model's lab, resolved against its recording."""

    kind: LabKind
    sizes: dict[str, int]
    special: dict[str, int]
    names: tuple[str, ...]
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    # The page's words for what the recipe handles (`thing = "digit"`), so that a kind names no model's things.
    words: dict[str, str] = field(default_factory=dict)
    # The groups the recipe's [display] draws a case's matrices in, in order (figures.Display): a kind that draws
    # them live (the image classifier's feature maps) requires them.
    groups: tuple[dict[str, str], ...] = ()
    warm: str = ""  # a lab.py function a new recipe worker calls with the server's arguments (loads a checkpoint)

    def token_name(self, token: int) -> str:
        """A token as a reader sees it: its declared name, else its special name, else its id."""
        if token < len(self.names):
            return self.names[token]
        return next((name for name, value in self.special.items() if value == token), str(token))

    def token_names(self) -> list[str]:
        """Every token of the vocabulary by name; a lab without a vocabulary size, its declared names."""
        if "vocab" not in self.sizes:
            return list(self.names)
        return [self.token_name(t) for t in range(self.sizes["vocab"])]

    def names_hint(self) -> str:
        """What a reader may type, in a few words: "letters a–z", "digits 0–9", "a or b", else the names listed."""
        names = self.token_names()
        runs = {"letters": "abcdefghijklmnopqrstuvwxyz", "capital letters": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                "digits": "0123456789"}
        joined = "".join(names)
        if len(names) > 2 and all(len(n) == 1 for n in names):
            for word, alphabet in runs.items():
                if joined in alphabet:
                    return f"{word} {names[0]}–{names[-1]}"
        if len(names) <= 3:
            return " or ".join(names)
        return f"one of {' '.join(names[:12])}{' …' if len(names) > 12 else ''}"

    def tokens(self, ids: list[int]) -> list[dict]:
        """An axis of token ids: each with its name, for a heatmap's labels and its table's headers."""
        return [{"id": t, "name": self.token_name(t)} for t in ids]

    def outcome(self, case: dict) -> str | None:
        """The case's outcome in one sentence, as the kind reads it (LabKind.outcome), else, for a held-out split the
        recipe scores, how many it got right (held_out)."""
        return self.kind.outcome(case, self) or held_out(case, self.words.get("thing"))

    def axes(self, case: dict) -> dict[str, dict]:
        """What the rows and columns of each of a case's matrices are, by matrix key, where the kind
        knows (tokens, positions or the vocabulary); a matrix it does not name keeps numbered axes."""
        return self.kind.axes(case, self)


def _size(manifest: dict, reference, where: str) -> int:
    """`"word_embeddings.num_embeddings"` read from the recorded graph, or a number as it stands."""
    if isinstance(reference, int) and not isinstance(reference, bool):
        return reference
    layer_id, _, param = str(reference).rpartition(".")
    for layer in manifest["layers"]:
        if layer["id"] == layer_id:
            value = layer.get("params", {}).get(param)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise DeclarationError(f"{where}: layer {layer_id!r} records no integer {param!r}")
    raise DeclarationError(f"{where}: the recorded graph has no layer {layer_id!r}")


# The fixed routes beside a model's lab endpoints (/api/models/<slug>/<name>): no endpoint may take their names.
TAKEN = ("files", "verifications", "interventions", "training", "retrainings", "variants", "activations")


def lab_spec(declaration: dict, manifest: dict, groups: tuple[dict, ...] = ()) -> LabSpec:
    """The [lab] declaration of a recipe, checked and resolved, with the groups its [display] draws matrices in;
    DeclarationError says what is wrong."""
    name = declaration.get("kind")
    if name not in KINDS:
        raise DeclarationError(f"lab.kind {name!r} is not one of {', '.join(sorted(KINDS))}")
    kind = KINDS[name]
    sizes = {name: _size(manifest, ref, f"lab.sizes.{name}") for name, ref in declaration.get("sizes", {}).items()}
    special = declaration.get("special", {})
    if not all(isinstance(v, int) for v in special.values()):
        raise DeclarationError("lab.special must map names to token ids")
    endpoints = {}
    for name, spec in declaration.get("endpoints", {}).items():
        where = f"lab.endpoints.{name}"
        entry = str(spec.get("entry", ""))
        if not name.isidentifier() or spec.get("method") not in METHODS or not entry.isidentifier():
            raise DeclarationError(f"{where}: needs a plain name, a method ({', '.join(METHODS)}) and an entry")
        if name in TAKEN:
            raise DeclarationError(f"{where}: {name} is a route of every model; the taken names are "
                                   f"{', '.join(TAKEN)}")
        fields = {f: declared_field(f, s, sizes, f"{where}.fields") for f, s in spec.get("fields", {}).items()}
        body = next((f.type for f in fields.values() if f.type in BODY_ONLY), None)
        if spec["method"] == "GET" and body:
            article = "an" if body[0] in "aeiou" else "a"
            raise DeclarationError(f"{where}: {article} {body} field needs a JSON body; declare the endpoint POST")
        endpoints[name] = Endpoint(name, spec["method"], spec["entry"], spec.get("summary", name), fields,
                                   spec.get("answers", "result"))
    warm = declaration.get("warm", "")
    if not isinstance(warm, str) or (warm and not warm.isidentifier()):
        raise DeclarationError("lab.warm must name a lab.py function")
    words = declaration.get("words", {})
    if not isinstance(words, dict) or not all(isinstance(v, str) and v for v in words.values()):
        raise DeclarationError("lab.words must map names to non-empty text")
    spec = LabSpec(kind, sizes, dict(special), tuple(declaration.get("names", ())), endpoints, words=dict(words),
                   groups=tuple(groups), warm=warm)
    for part, required in kind.requires.items():
        missing = [k for k in required if k not in getattr(spec, part)]
        if missing:
            raise DeclarationError(f"lab.{part} of a {kind.name} lab needs {', '.join(missing)}")
    kind.check(spec)
    return spec


def kind_files() -> dict[str, Path]:
    """Every kind's template, ES module and stylesheet, by the name each is served under."""
    return {name: path for kind in KINDS.values() for name, path in kind.files().items()}
