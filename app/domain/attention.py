"""Attention recorded for several layers and heads, gathered into one overview per kind of attention: every layer
and head of a case at once, as BertViz's model view shows them."""

import re

# A map of one layer's head: <kind>_b<layer>_h<head> or <kind>_l<layer>_h<head> (attention_b0_h1,
# encoder_attention_l1_h0), the keys the recipes record them under.
KEY = re.compile(r"^(?P<kind>[a-z_]*attention)_(?P<unit>[bl])(?P<layer>\d+)_h(?P<head>\d+)$")
UNITS = {"b": "block", "l": "layer"}


def overviews(matrices: list[dict]) -> list[dict]:
    """Each kind of attention a case records for more than one layer or head: its title, what a layer is called
    (block, layer), the layers and the heads (by number, in order) and the grid of their maps' keys, layers down
    and heads across (None where a layer lacks a head)."""
    found: dict[str, dict[int, dict[int, str]]] = {}
    units: dict[str, str] = {}
    for matrix in matrices:
        match = KEY.match(matrix["key"])
        if match:
            found.setdefault(match["kind"], {}).setdefault(int(match["layer"]), {})[int(match["head"])] = matrix["key"]
            units[match["kind"]] = UNITS[match["unit"]]
    result = []
    for kind, layers in found.items():
        heads = sorted({head for by_head in layers.values() for head in by_head})
        if len(layers) * len(heads) < 2:
            continue
        order = sorted(layers)
        result.append({"kind": kind, "title": kind.replace("_", " ").capitalize(), "unit": units[kind],
                       "layers": order, "heads": heads,
                       "grid": [[layers[layer].get(head) for head in heads] for layer in order]})
    return result
