"""Train the deep Q-network in the gridworld and store its weights beside this file.

    python train.py          # train (seconds), write weights.safetensors, print the greedy return from the start
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ
    python train.py --knob gamma=0.5 --knob explore_moves=1000   # a variant (recipe.toml's knobs), in variants/<id>/

Needs torch, safetensors and the recipe kit. The environment is gridworld.py: nothing is downloaded.
"""

import copy
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import knobs, training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .gridworld import MAX_STEPS, OPEN, START, observe, observe_all, step, terminal
from .model import WEIGHTS, QConfig, QNetwork

TRAIN_SEED = 2015  # initial weights, starts, exploration and replay sampling (Mnih et al., 2015)
EPISODES = 400
KNOBS = knobs.declared(Path(__file__).parent)  # gamma (the discount), explore_moves and explore_last (ε's fall)
RECORDED = knobs.chosen(KNOBS, {})  # every knob at its default: the recorded model
GAMMA = float(RECORDED["gamma"])  # the discount: a reward n moves away counts 0.9ⁿ
BATCH = 32
REPLAY = 5000  # transitions kept for replay
WARMUP = 200  # transitions gathered before the first update
TARGET_EVERY = 100  # moves between copies of the network into the target network
LEARNING_RATE, LEARNING_RATE_LAST = 1e-3, 1e-4  # Adam's step size, annealed linearly over the episodes
EXPLORE_FIRST = 1.0  # ε at first, annealed linearly to explore_last over the first explore_moves moves
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    1.0,
    "400 episodes of Q-learning amplify a last-bit difference: 0.20 and 0.42 apart seen on other processors",
    {
        "greedy_return": training.Bound(0.0, "the greedy episode from the start: the same moves pay the same"),
        "greedy_moves": training.Bound(0.0, "the greedy episode from the start takes the shortest way"),
        "largest_q_error": training.Bound(0.04, "|Q − Q*| over every cell and move: 0.021 seen on another processor"),
    },
)


def exploring(moves: int, settings: Mapping[str, knobs.Value] = RECORDED) -> float:
    """ε after this many moves: from EXPLORE_FIRST down to explore_last over explore_moves, then flat."""
    last, over = float(settings["explore_last"]), int(settings["explore_moves"])
    return max(last, EXPLORE_FIRST - (EXPLORE_FIRST - last) * moves / over)


@torch.no_grad()
def targets(target: QNetwork, rewards: Tensor, after: Tensor, done: Tensor, gamma: float = GAMMA) -> Tensor:
    """The paper's y = r + γ max_a' Q̂(s', a') from the target network, y = r where the move ended the episode."""
    return rewards + gamma * target(after).max(1).values * (1 - done)


def train(settings: Mapping[str, knobs.Value] = RECORDED) -> tuple[QNetwork, list[float]]:
    """The paper's Algorithm 1 on one thread: ε-greedy moves from a random open cell, every transition kept in a
    replay memory, a minibatch drawn from it each move for one Adam step on the Huber loss against the target
    network's y, the target network a copy of the online one every TARGET_EVERY moves. The network (in eval mode)
    and each episode's return."""
    gamma = float(settings["gamma"])
    starts = [cell for cell in OPEN if not terminal(cell)]
    with training.one_thread(TRAIN_SEED):
        online = QNetwork(QConfig())
        target = copy.deepcopy(online)
        optimizer = torch.optim.Adam(online.parameters(), lr=LEARNING_RATE)
        draw = torch.Generator().manual_seed(TRAIN_SEED)
        memory: deque = deque(maxlen=REPLAY)
        returns, moves = [], 0
        training.began()
        for episode in range(EPISODES):
            # A step size annealed towards the end, so that Q settles near Q* instead of wandering about it with
            # each minibatch (at 1e-3 throughout, |Q - Q*| ends 0.021 or 0.0034 as the kernels' rounding goes).
            for group in optimizer.param_groups:
                group["lr"] = LEARNING_RATE + (LEARNING_RATE_LAST - LEARNING_RATE) * episode / (EPISODES - 1)
            cell, total, losses = starts[int(torch.randint(len(starts), (1,), generator=draw))], 0.0, []
            for _ in range(MAX_STEPS):
                if torch.rand(1, generator=draw).item() < exploring(moves, settings):
                    action = int(torch.randint(4, (1,), generator=draw))
                else:
                    with torch.no_grad():
                        action = int(online(observe(cell)[None]).argmax())
                moved = step(cell, action)
                memory.append((cell, action, moved.reward, moved.cell, moved.done))
                total += moved.reward
                moves += 1
                if len(memory) >= WARMUP:
                    picked = [memory[i] for i in torch.randint(len(memory), (BATCH,), generator=draw).tolist()]
                    before, actions, rewards, after, done = zip(*picked, strict=True)
                    y = targets(
                        target,
                        torch.tensor(rewards),
                        observe_all(list(after)),
                        torch.tensor(done, dtype=torch.float32),
                        gamma,
                    )
                    q = online(observe_all(list(before))).gather(1, torch.tensor(actions)[:, None])[:, 0]
                    loss = nn.functional.smooth_l1_loss(q, y)  # the paper's clipped error: Huber
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
                if moves % TARGET_EVERY == 0:
                    target.load_state_dict(online.state_dict())
                cell = moved.cell
                if moved.done:
                    break
            returns.append(total)
            training.epoch_ended(
                episode + 1, EPISODES, sum(losses) / len(losses) if losses else None, {"return": total}, unit="episode"
            )
    return online.eval(), returns


def optimal_q(gamma: float = GAMMA) -> dict[tuple[int, int], list[float]]:
    """The exact Q*(s, a) of every open cell from which an episode goes on, by value iteration over the known
    environment until nothing moves: Q*(s, a) = r + γ max_a' Q*(s', a'), r alone where the move ends the episode."""
    states = [cell for cell in OPEN if not terminal(cell)]
    q = {cell: [0.0] * 4 for cell in states}
    while True:
        largest = 0.0
        for cell in states:
            for action in range(4):
                moved = step(cell, action)
                value = moved.reward + (0.0 if moved.done else gamma * max(q[moved.cell]))
                largest = max(largest, abs(value - q[cell][action]))
                q[cell][action] = value
        if largest < 1e-12:
            return q


@torch.no_grad()
def q_error(model: QNetwork, gamma: float = GAMMA) -> float:
    """The largest |Q(s, a) − Q*(s, a)| over every cell an episode can be in and every move."""
    exact = optimal_q(gamma)
    states = list(exact)
    q = model(observe_all(states)).tolist()  # (cells, 4)
    return max(abs(a - b) for cell, row in zip(states, q, strict=True) for a, b in zip(row, exact[cell], strict=True))


@torch.no_grad()
def greedy(model: QNetwork, start: tuple[int, int] = START) -> tuple[list[tuple[int, int]], float]:
    """The cells the greedy policy visits from `start` until the episode ends (or MAX_STEPS), and its return."""
    cell, path, total = start, [start], 0.0
    for _ in range(MAX_STEPS):
        moved = step(cell, int(model(observe(cell)[None]).argmax()))
        total += moved.reward
        cell = moved.cell
        path.append(cell)
        if moved.done:
            break
    return path, total


def trained(settings: Mapping[str, knobs.Value] = RECORDED) -> training.Trained:
    model, returns = train(settings)
    path, total = greedy(model)
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(model),
                training.metadata(
                    greedy_return=total,
                    greedy_moves=len(path) - 1,
                    largest_q_error=q_error(model, float(settings["gamma"])),
                    return_per_episode=returns,
                    train_seed=TRAIN_SEED,
                    episodes=EPISODES,
                ),
            )
        },
        summary=f"greedy from the start: {len(path) - 1} moves, return {total:.2f}; mean return of the last 50 "
        f"training episodes {sum(returns[-50:]) / 50:.3f}",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE, knobs=KNOBS)


if __name__ == "__main__":
    training.run(main)
