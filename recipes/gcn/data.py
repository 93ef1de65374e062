"""Zachary's karate club (1977), as networkx ships it, stored beside this file so that replaying the recipe needs
no networkx: the 78 friendships among the 34 members, the side each member joined when the club split, and
where each member is drawn.

    python data.py   # write karate.safetensors (it never changes)
"""

from pathlib import Path

import torch
from torch import Tensor

from recipekit import weights

DATA = Path(__file__).with_name("karate.safetensors")
SIDES = ("Mr. Hi", "Officer")  # networkx's names of the two clubs after the split, in the order of the classes
LAYOUT_SEED = 1977  # the drawing's spring layout (the year of Zachary's paper)
SOURCE = (
    "networkx karate_club_graph: W. W. Zachary, An information flow model for conflict and fission in small "
    "groups, Journal of Anthropological Research 33(4), 452-473 (1977)"
)


def made() -> dict[str, Tensor]:
    """The graph from networkx: its edges (78, 2) as member pairs (a < b), each member's side (34,) as 0 (Mr. Hi)
    or 1 (Officer), and a spring layout (34, 2) in -1..1."""
    import networkx
    import numpy

    graph = networkx.karate_club_graph()
    edges = torch.tensor(sorted(tuple(sorted(edge)) for edge in graph.edges()), dtype=torch.int64)
    sides = torch.tensor([SIDES.index(graph.nodes[m]["club"]) for m in sorted(graph)], dtype=torch.int64)
    at = networkx.spring_layout(graph, seed=LAYOUT_SEED)
    layout = torch.tensor(numpy.array([at[m] for m in sorted(graph)]), dtype=torch.float64)
    layout = layout / layout.abs().max()  # within -1..1
    return {"edges": edges, "sides": sides, "layout": layout.float()}


def karate() -> dict[str, Tensor]:
    """The stored graph: edges (78, 2), sides (34,), layout (34, 2)."""
    return weights.read(DATA)[0]


def main() -> None:
    weights.write(DATA, made(), {"source": SOURCE, "sides": ", ".join(SIDES)})
    print(f"wrote {DATA.name}: 34 members, 78 friendships")


if __name__ == "__main__":
    main()
