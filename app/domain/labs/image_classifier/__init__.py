"""The image-classifier lab kind: draw on a grid of grey levels, see the feature maps, the class
probabilities and the saliency of every edit, and trace one class's score back to the drawing. The page's
words for what an image shows come from `lab.words.thing` ("digit"), its feature maps' stages from
`display.groups`."""

from ...numbers import in_prose
from ..cases import metrics
from ..fields import DeclarationError
from ..kind import LabKind, Reads, check_names
from .shapes import ImageTrace


class ImageClassifier(LabKind):
    name = "image-classifier"
    requires = {"sizes": ("rows", "cols", "levels", "classes"), "endpoints": ("runs", "trace"), "words": ("thing",)}
    reads = {
        "runs": Reads(items=("probabilities", "prediction", "confidence")),
        "trace": Reads(keys=("method", "target", "predicted", "stages"), stages=("logit",)),
    }
    results = {"trace": ImageTrace}

    def check(self, spec) -> None:
        """Both endpoints take the drawing as a grid of the declared size; class names, where given, name
        every class."""
        for name in self.requires["endpoints"]:
            image = spec.endpoints[name].fields.get("image")
            if image is None or image.type != "grid":
                raise DeclarationError(f"lab.endpoints.{name} of an {self.name} lab needs an `image` grid field")
        check_names(spec, "classes", "classes")
        if not spec.groups:
            raise DeclarationError(f"display.groups: an {self.name} lab needs the feature-map stages to draw, each a "
                                   "key (its maps are keyed <key>_c<channel>) and a title")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded image as the run request that replays it, with its true class where recorded."""
        presets = []
        for case in cases:
            image = next((m["values"] for m in case.get("matrices", []) if m["key"] == "image"), None)
            if image is None:
                continue
            label = next((m["value"] for m in case.get("metrics", []) if m["key"] == "label"), None)
            request = {"image": image} | ({"label": label} if isinstance(label, int) else {})
            presets.append({"id": case["id"], "label": case["label"], "request": request})
        return presets


    def outcome(self, case: dict, spec) -> str | None:
        """“Read as “7” with probability 0.88: right, it is a 7”; the last part where the case says what it is."""
        found = metrics(case)
        if "prediction" not in found or "confidence" not in found:
            return None
        read = spec.token_name(int(found["prediction"]))
        said_read = f"Read as “{read}” with probability {in_prose(found['confidence'], 2)}"
        if found.get("label") is None:
            return f"{said_read}."
        meant = spec.token_name(int(found["label"]))
        thing = spec.words.get("thing", "input")
        return f"{said_read}: {'right' if meant == read else 'wrong'}, the {thing} is “{meant}”."


KIND = ImageClassifier()
