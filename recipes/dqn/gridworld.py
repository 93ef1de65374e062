"""The environment the Q-network learns in, written here: a 5x5 grid with walls, a goal and a pit. The agent moves
up, right, down or left; a move into a wall or off the grid leaves it where it was. Every move costs a little; the
goal pays 1 and the pit costs 1, and either ends the episode, as does running out of moves. Everything is
deterministic: what is random is only the agent's own exploration.

    #  the map: S the start, G the goal, P the pit, # a wall
    . . . . G
    . # . # P
    . # . . .
    . . . # .
    S . . . .
"""

from dataclasses import dataclass

import torch
from torch import Tensor

MAP = ("....G", ".#.#P", ".#...", "...#.", "S....")
SIZE = len(MAP)
ACTIONS = ("up", "right", "down", "left")
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # (row, column) of each action
STEP_REWARD = -0.04  # each move's cost: the shortest way to the goal pays most
GOAL_REWARD, PIT_REWARD = 1.0, -1.0
MAX_STEPS = 40  # an episode that has not ended by then is cut off
CHANNELS = ("agent", "wall", "goal", "pit")  # what the network sees: one plane each


def cells(mark: str) -> list[tuple[int, int]]:
    return [(r, c) for r, row in enumerate(MAP) for c, char in enumerate(row) if char == mark]


START, GOAL, PIT = cells("S")[0], cells("G")[0], cells("P")[0]
WALLS = frozenset(cells("#"))
OPEN = [(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) not in WALLS]  # where the agent can stand


@dataclass(frozen=True)
class Step:
    """What one move does: where the agent ends up, what it is paid, and whether the episode ends there."""

    cell: tuple[int, int]
    reward: float
    done: bool


def step(cell: tuple[int, int], action: int) -> Step:
    """Move from `cell` by `action` (0 up, 1 right, 2 down, 3 left)."""
    r, c = cell[0] + MOVES[action][0], cell[1] + MOVES[action][1]
    if not (0 <= r < SIZE and 0 <= c < SIZE) or (r, c) in WALLS:
        r, c = cell  # the move is blocked
    if (r, c) == GOAL:
        return Step((r, c), GOAL_REWARD, True)
    if (r, c) == PIT:
        return Step((r, c), PIT_REWARD, True)
    return Step((r, c), STEP_REWARD, False)


def terminal(cell: tuple[int, int]) -> bool:
    return cell in (GOAL, PIT)


def observe(cell: tuple[int, int]) -> Tensor:
    """The agent's view of the grid at `cell`: one 5x5 plane per channel (CHANNELS), (4, 5, 5)."""
    planes = torch.zeros(len(CHANNELS), SIZE, SIZE)
    planes[0, cell[0], cell[1]] = 1.0
    for r, c in WALLS:
        planes[1, r, c] = 1.0
    planes[2, GOAL[0], GOAL[1]] = 1.0
    planes[3, PIT[0], PIT[1]] = 1.0
    return planes


def observe_all(where: list[tuple[int, int]]) -> Tensor:
    """Views of several cells as one batch (B, 4, 5, 5)."""
    return torch.stack([observe(cell) for cell in where])
