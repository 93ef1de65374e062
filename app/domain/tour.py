"""The guided tour a model page walks: an overview of the whole model at block level, then the recipe's steps."""

OVERVIEW = "overview"  # the id of the step every page opens on; a recipe's step may not take it
NAMED = 10  # parts the overview names before it says how many more there are


def overview(manifest: dict) -> dict:
    """The tour's first step: the model's top-level parts in reading order, with every module closed."""
    top = [layer for layer in manifest["layers"] if not layer.get("parent")]
    # An op recorded by its call site (`add@Model#0`) has no name a reader would know it by.
    parts = [layer["id"] for layer in top if layer["kind"] in ("module", "layer") and "@" not in layer["id"]]
    modules = sum(layer["kind"] == "module" for layer in top)
    named = ", ".join(parts[:NAMED]) + (f" and {len(parts) - NAMED} more" if len(parts) > NAMED else "")
    note = f"From the input at the top to the output at the bottom, the numbers pass through {named}."
    if modules:
        boxes = f"{modules} boxes marked ▸ are modules" if modules > 1 else "box marked ▸ is a module"
        note += (f" The {boxes} drawn closed: open one to look inside, or press Next and the tour opens each"
                 " where it matters.")
    return {"id": OVERVIEW, "title": f"The whole {manifest['className']} at a glance", "note": note, "target": ""}


def steps(manifest: dict) -> list[dict]:
    """Every step of the page's tour, the overview first."""
    return [overview(manifest), *manifest["steps"]]


def key_step(manifest: dict) -> dict | None:
    """The recipe's opening step (`openingStep`), which the overview points to as the heart of the tour."""
    return next((s for s in manifest["steps"] if s["id"] == manifest.get("openingStep")), None)
