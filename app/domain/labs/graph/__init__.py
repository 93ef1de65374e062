"""The graph lab kind: a graph drawn with every node coloured by the group the model places it in; add or remove an
edge, or give other nodes' groups, and the recipe trains the model again on the spot and answers what it makes of
every node (its probability of each group, its embedding after the first layer) and of the graph (the normalised
adjacency). What a node and a group are is named in the recipe's words (`lab.words`: thing "member", group
"side"), each node by `lab.names`."""

from ..cases import metrics, vectors
from ..fields import DeclarationError
from ..kind import LabKind, Reads, check_names


class Graph(LabKind):
    name = "graph"
    requires = {"sizes": ("members", "classes"), "endpoints": ("runs",), "words": ("thing", "group")}
    # A run's case: the graph it was trained on (its edges, where each node is drawn, the nodes given), what the
    # model makes of each node, and each node's true group.
    reads = {"runs": Reads(items=("edges", "layout", "given", "probabilities", "hidden", "normalised", "predicted",
                                  "sides", "accuracy", "right"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the edges and one node given per group; names, where given, name every node."""
        fields = spec.endpoints["runs"].fields
        edges, given = fields.get("edges"), fields.get("given")
        if edges is None or edges.type != "edges" or edges.max is None or edges.max + 1 != spec.sizes["members"]:
            raise DeclarationError(f"lab.endpoints.runs of a {self.name} lab needs an `edges` field of edges between "
                                   "0 and the members")
        if given is None or given.type != "ints" or given.length != spec.sizes["classes"] or not given.unique:
            raise DeclarationError(f"lab.endpoints.runs of a {self.name} lab needs a `given` field of unique ints, one "
                                   "node per group (its length is the classes)")
        check_names(spec, "members", "members")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded graph as the run request that trains on it: its edges and the nodes given."""
        presets = []
        for case in cases:
            edges = next((m["values"] for m in case.get("matrices", []) if m["key"] == "edges"), None)
            given = vectors(case).get("given")
            if edges is not None and given is not None:
                request = {"edges": [[int(a), int(b)] for a, b in edges], "given": [int(g) for g in given]}
                presets.append({"id": case["id"], "label": case["label"], "request": request})
        return presets


    def outcome(self, case: dict, spec) -> str | None:
        """“31 of the 32 members not given placed on the side they joined (97%), trained on 78 links”."""
        found, counts = vectors(case), metrics(case)
        if "predicted" not in found or "right" not in counts:
            return None
        others = len(found["predicted"]) - len(found.get("given", []))
        thing, group = spec.words["thing"], spec.words["group"]
        links = next((len(m["values"]) for m in case.get("matrices", []) if m["key"] == "edges"), None)
        trained = f", trained on {links} links" if links is not None else ""
        return (f"{counts['right']} of the {others} {thing}s not given placed on the {group} they joined "
                f"({round(100 * counts['right'] / max(others, 1))}%){trained}.")


KIND = Graph()
