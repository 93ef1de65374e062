"""Replay the recorded gridworld cases and the numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, train.py, gridworld.py and weights.safetensors beside this file.
"""

import json
import sys
from collections import deque
from functools import partial

import torch

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import matrix, metric, vector
from recipekit.refusals import Refused
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .gridworld import ACTIONS, GOAL, MAX_STEPS, OPEN, PIT, SIZE, START, WALLS, observe, observe_all, step, terminal
from .model import WEIGHTS, QNetwork, build_model
from .train import GAMMA, greedy, optimal_q, q_error, targets

EXPLORED = ((2, 2), 0.3, 5)  # the recorded ε-greedy episode: its start, ε and seed
ROWS = [f"row {r}" for r in range(SIZE)]
COLUMNS = [f"column {c}" for c in range(SIZE)]
KINDS = {"open": 0, "wall": 1, "goal": 2, "pit": 3, "start": 4}  # the map's codes


def name(cell: tuple[int, int]) -> str:
    return f"({cell[0]}, {cell[1]})"


def grid_map() -> list[list[int]]:
    """The grid as codes (KINDS): 0 open, 1 wall, 2 goal, 3 pit, 4 the start."""
    codes = [[KINDS["open"]] * SIZE for _ in range(SIZE)]
    for (r, c), kind in [*((w, "wall") for w in WALLS), (GOAL, "goal"), (PIT, "pit"), (START, "start")]:
        codes[r][c] = KINDS[kind]
    return codes


@torch.no_grad()
def episode(model: QNetwork, start: tuple[int, int], epsilon: float = 0.0, seed: int = 0) -> dict:
    """One episode from `start`, ε-greedy (ε = 0: greedy) with the seed's draws, as a case: the Q-value of every move
    at every state, the move made (and whether it explored), what it paid, and the path over the grid."""
    if start not in OPEN or terminal(start):
        what = "a wall" if start in WALLS else "where an episode ends" if terminal(start) else "off the grid"
        raise Refused(f"start: {name(start)} is {what}; start from an open cell")
    draw = torch.Generator().manual_seed(seed)
    cell, q_rows, moves, explored, rewards, visited = start, [], [], [], [], [[0] * SIZE for _ in range(SIZE)]
    visited[cell[0]][cell[1]] = 1
    for _ in range(MAX_STEPS):
        cell = kit.step_state("episode", cell, f"move {len(moves) + 1}")  # (row, column); step by step, the recorded
        q = model(observe(cell)[None])[0]
        explore = torch.rand(1, generator=draw).item() < epsilon
        action = int(torch.randint(4, (1,), generator=draw)) if explore else int(q.argmax())
        moved = step(cell, action)
        q_rows.append(q.tolist())
        moves.append(action)
        explored.append(int(explore))
        rewards.append(moved.reward)
        cell = moved.cell
        visited[cell[0]][cell[1]] = len(moves) + 1  # the step at which the agent is there, last visit
        if moved.done:
            break
    where = [start]
    for action in moves:
        where.append(step(where[-1], action).cell)
    return {
        "label": f"From {name(start)}, " + ("greedy" if epsilon == 0 else f"ε = {epsilon:g}, seed {seed}"),
        "matrices": [
            matrix(
                "q_values",
                "Q(s, a) of every move at each state of the episode",
                q_rows,
                rows=[f"move {k + 1} at {name(c)}" for k, c in enumerate(where[:-1])],
                columns=list(ACTIONS),
            ),
            matrix(
                "cells",
                "The cell the agent stands on before each move, and at the end",
                [list(c) for c in where],
                columns=["row", "column"],
            ),
            matrix(
                "path",
                "Where the agent was: the move after which it stood on each cell (1: the start), 0 where it never went",
                visited,
                rows=ROWS,
                columns=COLUMNS,
            ),
            matrix(
                "map", "The grid: 0 open, 1 wall, 2 goal, 3 pit, 4 the start", grid_map(), rows=ROWS, columns=COLUMNS
            ),
        ],
        "vectors": [
            vector("actions", "The move made at each state (0 up, 1 right, 2 down, 3 left)", moves, first=1),
            vector("explored", "Whether each move was a random one (1) or the greedy one (0)", explored, first=1),
            vector("rewards", "What each move paid", rewards, first=1),
            vector("start", "The start: row, column", list(start)),
        ],
        "metrics": [
            metric("return", "Return: the rewards summed, undiscounted", sum(rewards)),
            metric("moves", "Moves", len(moves)),
            metric("reached", "Reached the goal (1) or not (0)", int(cell == GOAL)),
            metric("fell", "Fell into the pit (1) or not (0)", int(cell == PIT)),
            metric("epsilon", "ε: the chance of a random move", epsilon),
            metric("seed", "Seed of the random moves", seed),
        ],
    }


@torch.no_grad()
def policy(model: QNetwork) -> dict:
    """The greedy policy over the grid as a case: Q(s, a) of every open cell, V(s) = max_a Q(s, a), each cell's
    greedy move, and beside them the exact Q* from value iteration."""
    states = [cell for cell in OPEN if not terminal(cell)]
    q = model(observe_all(states))  # (cells, 4)
    exact = optimal_q()
    values = [[0.0] * SIZE for _ in range(SIZE)]
    best = [[-1] * SIZE for _ in range(SIZE)]
    for cell, row in zip(states, q.tolist(), strict=True):
        values[cell[0]][cell[1]] = max(row)
        best[cell[0]][cell[1]] = row.index(max(row))
    agree = sum(exact[c][best[c[0]][c[1]]] >= max(exact[c]) - 1e-9 for c in states)  # ties: any best move counts
    return {
        "label": "The greedy policy over the grid",
        "matrices": [
            matrix(
                "values",
                "V(s) = max_a Q(s, a): the return the network expects from each cell (0 on "
                "walls and where episodes end)",
                values,
                rows=ROWS,
                columns=COLUMNS,
            ),
            matrix(
                "policy",
                "The greedy move from each cell (0 up, 1 right, 2 down, 3 left; -1 none)",
                best,
                rows=ROWS,
                columns=COLUMNS,
            ),
            matrix(
                "q_values",
                "Q(s, a) of every open cell",
                q.tolist(),
                rows=[name(c) for c in states],
                columns=list(ACTIONS),
            ),
            matrix(
                "optimal",
                "Q*(s, a) by value iteration over the known grid",
                [exact[c] for c in states],
                rows=[name(c) for c in states],
                columns=list(ACTIONS),
            ),
            matrix(
                "map", "The grid: 0 open, 1 wall, 2 goal, 3 pit, 4 the start", grid_map(), rows=ROWS, columns=COLUMNS
            ),
        ],
        "vectors": [],
        "metrics": [
            metric("agree", "Cells whose greedy move is an optimal one (value iteration)", agree),
            metric("cells", "Cells an episode can be in", len(states)),
            metric("largest_error", "Largest |Q − Q*|", q_error(model)),
        ],
    }


def training_case() -> dict:
    metadata = stored.read(WEIGHTS)[1]
    returns = json.loads(metadata["return_per_episode"])
    return {
        "label": "Training: the return of every episode",
        "matrices": [],
        "vectors": [
            vector(
                "training_return",
                "The return of each training episode (ε-greedy, from a random open cell)",
                returns,
                first=1,
            )
        ],
        "metrics": [
            metric("last_50", "Mean return of the last 50 episodes", sum(returns[-50:]) / 50),
            metric(
                "greedy_return",
                "Greedy return from the start, as train.py measured it",
                float(metadata["greedy_return"]),
            ),
        ],
    }


# The checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_BELLMAN = "Each training target is r + γ max_a' Q̂(s', a'), computed move by move by hand"
CHECK_SHORTEST = "From every cell the greedy policy takes a shortest way to the goal around the pit (breadth-first)"
CHECK_OPTIMAL = "The network's Q is within 0.01 of the exact Q* from value iteration"
CHECK_HELD = "The stored weights reproduce the greedy return measured when they were trained"
CLOSE = 1e-6


@torch.no_grad()
def check_bellman(model: QNetwork) -> dict:
    """Every move from every cell, as a replayed batch: train.py's targets against y = r for a move that ends the
    episode, else r + γ times the largest of the four values the network gives the next cell alone."""
    moves = [(cell, action) for cell in OPEN if not terminal(cell) for action in range(4)]
    results = [step(cell, action) for cell, action in moves]
    batch = targets(
        model,
        torch.tensor([m.reward for m in results]),
        observe_all([m.cell for m in results]),
        torch.tensor([m.done for m in results], dtype=torch.float32),
    )
    by_hand = [
        m.reward if m.done else m.reward + GAMMA * max(model(observe(m.cell)[None])[0].tolist()) for m in results
    ]
    worst = max(abs(a - b) for a, b in zip(batch.tolist(), by_hand, strict=True))
    return {
        "passed": worst <= CLOSE,
        "detail": {"largest_difference": worst, "transitions": len(moves), "ending": sum(m.done for m in results)},
    }


def shortest() -> dict[tuple[int, int], int]:
    """Moves from each cell to the goal by breadth-first search over the grid, never through the pit."""
    distance = {GOAL: 0}
    frontier = deque([GOAL])
    while frontier:
        cell = frontier.popleft()
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            near = (cell[0] + dr, cell[1] + dc)
            if near in OPEN and near != PIT and near not in distance:
                distance[near] = distance[cell] + 1
                frontier.append(near)
    return distance


def check_shortest(model: QNetwork) -> dict:
    distance = shortest()
    found = {cell: greedy(model, cell)[0] for cell in OPEN if not terminal(cell)}
    longer = [name(c) for c, path in found.items() if path[-1] != GOAL or len(path) - 1 != distance[c]]
    return {
        "passed": not longer,
        "detail": {"cells": len(found), "not_shortest": longer, "longest_shortest_way": max(distance.values())},
    }


def check_optimal(model: QNetwork) -> dict:
    error = next(m["value"] for m in policy(model)["metrics"] if m["key"] == "largest_error")
    return {"passed": error <= 0.01, "detail": {"largest_error": error}}


def check_held(model: QNetwork) -> dict:
    replayed = greedy(model)[1]
    trained = float(stored.read(WEIGHTS)[1].get("greedy_return", "nan"))
    return kit.reproduced(
        replayed,
        trained,
        0,
        "the rewards of the greedy episode's moves, the same numbers "
        "summed in the same order: rounding moves it only where it flips a move at a near tie",
    )


CHECKS = {
    CHECK_BELLMAN: check_bellman,
    CHECK_SHORTEST: check_shortest,
    CHECK_OPTIMAL: check_optimal,
    CHECK_HELD: check_held,
}


def replay(model: QNetwork | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    start, epsilon, seed = EXPLORED
    cases = {
        "greedy": partial(episode, model, START),
        "explore": partial(episode, model, start, epsilon, seed),
        "policy": partial(policy, model),
        "training": training_case,
    }
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
