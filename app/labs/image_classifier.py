"""The image-classifier lab kind: draw on a grid of grey levels, see the feature maps, the class
probabilities and the saliency of every edit, and trace one class's score back to the drawing."""

from .fields import DeclarationError

NAME = "image-classifier"
TEMPLATE = "labs/image-classifier.html"
SCRIPT = "js/labs/image-classifier.js"
# What this kind's page relies on, by part of the declaration.
REQUIRES = {"sizes": ("rows", "cols", "levels", "classes"), "endpoints": ("runs", "trace")}


def check(spec) -> None:
    """Both endpoints take the drawing as a grid of the declared size; class names, where given, name every
    class."""
    for name in REQUIRES["endpoints"]:
        image = spec.endpoints[name].fields.get("image")
        if image is None or image.type != "grid":
            raise DeclarationError(f"lab.endpoints.{name} of an {NAME} lab needs an `image` grid field")
    if spec.names and len(spec.names) != spec.sizes["classes"]:
        raise DeclarationError(f"lab.names lists {len(spec.names)} classes; the model has {spec.sizes['classes']}")


def prepare(endpoint: str, args: dict, spec) -> dict:
    """Nothing depends on another field here: the grid's size and range are checked by its declaration."""
    return args


def presets(cases: list[dict], spec) -> list[dict]:
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
