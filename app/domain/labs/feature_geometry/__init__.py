"""The feature-geometry lab kind: a toy model that writes more features than it has dimensions (superposition),
each feature's direction drawn as an arrow; choose the model of one sparsity, drop a feature or turn its direction,
and see what the model writes and reads back, and what its loss becomes."""

from ..cases import metrics, vectors
from ..fields import DeclarationError
from ..kind import LabKind, Reads


class FeatureGeometry(LabKind):
    name = "feature-geometry"
    requires = {"sizes": ("features", "models"), "endpoints": ("runs",)}
    # A run's case: where each feature is written (a column of W: a row of `columns`), each column's length, the
    # example read back, and the held-out loss with the edits and as trained.
    reads = {"runs": Reads(items=("columns", "lengths", "example", "read_back", "held_out_loss", "sparsity"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the model, the features to drop and each feature's turn; `names` name the models
        (each its sparsity)."""
        fields = spec.endpoints["runs"].fields
        for name, kind in (("model", "int"), ("drop", "ints"), ("turn", "numbers")):
            if name not in fields or fields[name].type != kind:
                raise DeclarationError(f"lab.endpoints.runs of a {self.name} lab needs a `{name}` field of {kind}")
        if len(spec.names) != spec.sizes["models"]:
            raise DeclarationError(f"lab.names must name each of the {spec.sizes['models']} models (its sparsity)")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded model's case as the run that replays it: that model, unedited."""
        found = []
        for case in cases:
            sparsity = metrics(case).get("sparsity")
            model = next((i for i, n in enumerate(spec.names) if sparsity is not None and float(n) == sparsity), None)
            if model is not None:
                found.append({"id": case["id"], "label": case["label"], "request": {"model": model}})
        return found

    def outcome(self, case: dict, spec) -> str | None:
        """“Writes 5 of its 5 features; held-out loss 0.02084, against 0.03609 as trained.”, or, for every model at
        once (a vector `features_written`, one per model), how many each writes."""
        found = metrics(case)
        written = vectors(case).get("features_written")
        if written is not None and len(written) == len(spec.names):
            counts = ", ".join(f"{n:g}" for n in written[:-1]) + f" and {written[-1]:g}"
            return f"Writes {counts} of its {spec.sizes['features']} features at {spec.words.get('model', 'model')} " \
                   f"{', '.join(spec.names[:-1])} and {spec.names[-1]}."
        if "features_written" not in found or "held_out_loss" not in found:
            return None
        said = f"Writes {found['features_written']:g} of its {spec.sizes['features']} features; held-out loss " \
               f"{found['held_out_loss']:.4g}"
        if "trained_loss" in found and abs(found["trained_loss"] - found["held_out_loss"]) > 1e-9:
            said += f", against {found['trained_loss']:.4g} as trained"
        return said + "."


KIND = FeatureGeometry()
