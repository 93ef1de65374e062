"""Replay the recorded karate-club cases and the numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, train.py, data.py and the two .safetensors files beside this file.
"""

import json
import sys
import tomllib
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .data import SIDES, karate
from .model import GCN, WEIGHTS, GCNConfig, adjacency, build_model, features
from .train import GIVEN, RETRAIN_TOLERANCE, TRAIN_SEED, accuracy, train

NAMES = tomllib.loads(Path(__file__).with_name("recipe.toml").read_text())["lab"]["names"]  # the members, as the lab
SIDE_NAMES = [f"{side}'s side" for side in SIDES]
CUT = [8, 33]  # the recorded what-if: member 8's friendship with the Officer removed


def case(
    model: GCN, edges: Tensor | list, given: tuple[int, int], label: str, losses: list[float] | None = None
) -> dict:
    """A graph's case in the manifest's shape: the friendships and the members given, what the model makes of every
    member (its embedding after the first layer, its probability of each side) and of the graph (Â), against the
    side each member joined."""
    graph = karate()
    a, x = adjacency(edges), features()
    with torch.no_grad():
        normalised = model.normalise(a)
        hidden = model.relu(model.conv1(x, normalised))  # (34, hidden)
        probabilities = model.conv2(hidden, normalised).softmax(1)  # (34, 2)
    predicted = probabilities.argmax(1)
    others = [m for m in range(34) if m not in given]
    right = int((predicted[others] == graph["sides"][others]).sum())
    pairs = torch.as_tensor(edges, dtype=torch.int64).view(-1, 2).tolist()
    units = [f"unit {u + 1}" for u in range(hidden.shape[1])]
    found = {
        "label": label,
        "matrices": [
            matrix(
                "probabilities",
                "The probability of each side, member by member",
                probabilities.tolist(),
                rows=NAMES,
                columns=SIDE_NAMES,
            ),
            matrix(
                "hidden",
                "Each member's embedding after the first graph convolution (ReLU)",
                hidden.tolist(),
                rows=NAMES,
                columns=units,
            ),
            matrix(
                "normalised",
                "The normalised adjacency Â = D̃^-½ (A + I) D̃^-½",
                normalised.tolist(),
                rows=NAMES,
                columns=NAMES,
            ),
            matrix("edges", "The friendships: the two members of each", pairs, columns=["member", "friend"]),
            matrix(
                "layout",
                "Where the page draws each member (a spring layout of Zachary's graph)",
                graph["layout"].tolist(),
                rows=NAMES,
                columns=["x", "y"],
            ),
        ],
        "vectors": [
            vector(
                "predicted",
                f"The side each member is placed on (0: {SIDE_NAMES[0]}, 1: {SIDE_NAMES[1]})",
                predicted.tolist(),
                names=NAMES,
            ),
            vector(
                "sides",
                "The side each member joined when the club split (Zachary, 1977)",
                graph["sides"].tolist(),
                names=NAMES,
            ),
            vector("given", f"The members whose sides are given: {SIDE_NAMES[0]}, then {SIDE_NAMES[1]}", list(given)),
        ],
        "metrics": [
            metric("accuracy", "Members not given placed on the side they joined", right / len(others)),
            metric("right", "Of the 32 members not given, placed right", right),
            metric("friendships", "Friendships", len(pairs)),
        ],
    }
    if losses is not None:
        found["vectors"].append(
            vector("training_loss", "The cross entropy of the two given members in each epoch", losses, first=1)
        )
    return found


def club_case(model: GCN) -> dict:
    """Zachary's graph with Mr. Hi's and the Officer's sides given, on the stored weights, and the training curve."""
    losses = json.loads(stored.read(WEIGHTS)[1]["loss_per_epoch"])
    return case(
        model, karate()["edges"], GIVEN, "Zachary's karate club, Mr. Hi's and the Officer's sides given", losses
    )


def edited_case(edges: Tensor | list, given: tuple[int, int], label: str) -> dict:
    """A graph and two members given, the model trained on them from the seed (as the lab does)."""
    fitted = train(edges, given)
    return case(fitted.model, edges, given, label, fitted.losses)


def cut_case() -> dict:
    edges = [pair for pair in karate()["edges"].tolist() if pair != CUT]
    return edited_case(edges, GIVEN, f"Member {CUT[0]}'s friendship with the Officer removed, retrained")


def untrained_case() -> dict:
    """The model as the seed makes it, before any training: its embeddings already follow the graph."""
    with torch.random.fork_rng():
        torch.manual_seed(TRAIN_SEED)
        model = GCN(GCNConfig()).eval()
    return case(model, karate()["edges"], GIVEN, "Before training: the weights the seed draws")


# The checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_SPARSE = "Each graph convolution is Â H W computed as a sparse product over the friendships and self-loops"
CHECK_SPECTRUM = "Â's largest eigenvalue is 1, its eigenvector √d̃: the normalisation of Kipf & Welling"
CHECK_HELD = "The stored weights reproduce the accuracy measured when they were trained, on Zachary's 34 members"
CHECK_RETRAIN = "Training again from the seed, as the lab does, reproduces the stored weights"
CLOSE = 1e-6


def sparse_normalised(edges: Tensor) -> Tensor:
    """Â as a sparse matrix built from the edge list alone: a self-loop per member and both directions of each
    friendship, each weighed 1 / √((d_i + 1)(d_j + 1)) with d the member's number of friends."""
    pairs = torch.cat([edges, edges.flip(1), torch.arange(34)[:, None].repeat(1, 2)])  # (2E + N, 2)
    degree = torch.bincount(edges.flatten(), minlength=34).double() + 1  # d + 1, the self-loop counted
    values = (degree[pairs[:, 0]] * degree[pairs[:, 1]]).rsqrt()
    return torch.sparse_coo_tensor(pairs.T, values, (34, 34), check_invariants=True).coalesce()


@torch.no_grad()
def check_sparse(model: GCN) -> dict:
    """Both layers of the stored model on Zachary's graph against the same products taken with the sparse Â, in
    double precision from the layers' weights."""
    edges = karate()["edges"]
    a_hat = sparse_normalised(edges)
    x = features().double()
    w1, w2 = model.conv1.linear.weight.double(), model.conv2.linear.weight.double()
    hidden = torch.sparse.mm(a_hat, x @ w1.T).relu()
    scores = torch.sparse.mm(a_hat, hidden @ w2.T)
    normalised = model.normalise(adjacency(edges))
    dense_hidden = model.relu(model.conv1(features(), normalised))
    dense_scores = model.conv2(dense_hidden, normalised)
    worst = {
        "normalised": (normalised.double() - a_hat.to_dense()).abs().max().item(),
        "layer_1": (dense_hidden.double() - hidden).abs().max().item(),
        "layer_2": (dense_scores.double() - scores).abs().max().item(),
    }
    return {
        "passed": all(v <= CLOSE for v in worst.values()),
        "detail": {"largest_difference": worst, "stored_entries": a_hat.values().numel()},
    }


@torch.no_grad()
def check_spectrum(model: GCN) -> dict:
    edges = karate()["edges"]
    normalised = model.normalise(adjacency(edges)).double()
    values, vectors = torch.linalg.eigh(normalised)
    root = (torch.bincount(edges.flatten(), minlength=34).double() + 1).sqrt()
    direction = vectors[:, -1] * vectors[:, -1].sign()[0]
    along = (direction - root / root.norm()).abs().max().item()
    symmetric = (normalised - normalised.T).abs().max().item()
    # Each bound is CLOSE: a float64 eigendecomposition of a 34 x 34 matrix built from float32 products, whose order
    # (and so whose last bits) the kernels choose.
    return {
        "passed": abs(values[-1].item() - 1) <= CLOSE
        and values[0].item() >= -1 - CLOSE
        and along <= CLOSE
        and symmetric <= CLOSE,
        "detail": {
            "largest": values[-1].item(),
            "smallest": values[0].item(),
            "eigenvector_difference": along,
            "asymmetry": symmetric,
            "allowed": CLOSE,
        },
    }


def check_held(model: GCN) -> dict:
    graph = karate()
    replayed = accuracy(model, graph["edges"], graph["sides"])
    trained = float(stored.read(WEIGHTS)[1].get("accuracy", "nan"))
    members, friendships = len(graph["sides"]), len(graph["edges"])
    on_each = torch.bincount(graph["sides"]).tolist()
    held = kit.reproduced(replayed, trained, 0, kit.COUNTED)
    return {
        "passed": held["passed"] and (members, friendships) == (34, 78),
        "detail": held["detail"] | {"members": members, "friendships": friendships, "members_on_each_side": on_each},
    }


def check_retrain(model: GCN) -> dict:
    retrained = train(karate()["edges"]).model
    worst = stored.largest_difference(stored.state_of(retrained), stored.state_of(model))
    return {
        "passed": worst <= RETRAIN_TOLERANCE,
        "detail": {"largest_weight_difference": worst, "tolerance": RETRAIN_TOLERANCE},
    }


CHECKS = {
    CHECK_SPARSE: check_sparse,
    CHECK_SPECTRUM: check_spectrum,
    CHECK_HELD: check_held,
    CHECK_RETRAIN: check_retrain,
}


def replay(model: GCN | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {"club": partial(club_case, model), "cut": cut_case, "untrained": untrained_case}
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
