"""The deep Q-network recipe against independent computations (the grid's moves from a table written out by hand,
Q* by value iteration in NumPy, the targets by the Bellman equation), its checks (each one broken), the retraining
command and its lab (its verification: tests/test_recordings.py)."""

import json

import numpy as np
import pytest
import torch

from app.services.config import PROJECT_ROOT

from .conftest import recipe_module

RECIPE = PROJECT_ROOT / "recipes" / "dqn"
MANIFEST = PROJECT_ROOT / "manifests" / "dqn" / "manifest.json"
grid = recipe_module(RECIPE, "gridworld")
dqn = recipe_module(RECIPE, "model")
recipe = recipe_module(RECIPE, "run")
train = recipe_module(RECIPE, "train")

UP, RIGHT, DOWN, LEFT = range(4)


@pytest.fixture(scope="module")
def model():
    return dqn.build_model()


@pytest.mark.parametrize(("cell", "action", "to", "reward", "done"), [
    ((4, 0), UP, (3, 0), -0.04, False),
    ((4, 0), LEFT, (4, 0), -0.04, False),  # off the grid: blocked
    ((4, 0), DOWN, (4, 0), -0.04, False),
    ((2, 0), RIGHT, (2, 0), -0.04, False),  # into the wall at (2, 1)
    ((0, 3), RIGHT, (0, 4), 1.0, True),  # the goal
    ((2, 4), UP, (1, 4), -1.0, True),  # the pit
    ((3, 4), LEFT, (3, 4), -0.04, False),  # the wall at (3, 3)
])
def test_the_grid_moves_as_its_map_says(cell, action, to, reward, done):
    moved = grid.step(cell, action)
    assert (moved.cell, moved.reward, moved.done) == (to, pytest.approx(reward), done)


def numpy_value_iteration(gamma: float) -> dict:
    """Q* written again over the map's characters: a move into '#' or off the grid stays, 'G' pays 1 and ends,
    'P' costs 1 and ends, anything else costs 0.04."""
    rows = grid.MAP
    cells = [(r, c) for r in range(5) for c in range(5) if rows[r][c] not in "#GP"]
    index = {cell: k for k, cell in enumerate(cells)}
    q = np.zeros((len(cells), 4))
    for _ in range(1000):
        new = np.empty_like(q)
        for (r, c), k in index.items():
            for a, (dr, dc) in enumerate(((-1, 0), (0, 1), (1, 0), (0, -1))):
                nr, nc = r + dr, c + dc
                if not (0 <= nr < 5 and 0 <= nc < 5) or rows[nr][nc] == "#":
                    nr, nc = r, c
                mark = rows[nr][nc]
                new[k, a] = 1.0 if mark == "G" else -1.0 if mark == "P" else -0.04 + gamma * q[index[(nr, nc)]].max()
        if np.abs(new - q).max() < 1e-13:
            break
        q = new
    return {cell: q[k] for cell, k in index.items()}


def test_the_recipe_s_value_iteration_matches_numpy_s_and_the_network_is_near_it(model):
    exact = numpy_value_iteration(train.GAMMA)
    ours = recipe.optimal_q()
    assert set(ours) == set(exact)
    for cell, values in exact.items():
        np.testing.assert_allclose(ours[cell], values, atol=1e-10)
    with torch.no_grad():
        learnt = model(grid.observe_all(list(exact))).double().numpy()
    assert np.abs(learnt - np.stack(list(exact.values()))).max() < 0.01


def test_checks_pass_on_the_stored_weights(model):
    result = recipe.replay(model)
    assert [c["name"] for c in result["checks"]] == list(recipe.CHECKS)
    assert all(c["passed"] for c in result["checks"]), [c for c in result["checks"] if not c["passed"]]


def test_the_bellman_check_catches_targets_that_forget_that_an_episode_ended(monkeypatch, model):
    def no_end(target, rewards, after, done, gamma=train.GAMMA):
        return rewards + gamma * target(after).max(1).values

    monkeypatch.setattr(recipe, "targets", no_end)
    result = recipe.check_bellman(model)
    assert not result["passed"] and result["detail"]["largest_difference"] > 0.1


def test_the_shortest_and_optimal_checks_catch_a_network_that_turns_back(model):
    broken = dqn.build_model()
    with torch.no_grad():
        broken.values.out.bias[LEFT] += 1.0  # left is now every cell's best move
    assert recipe.check_shortest(broken)["detail"]["not_shortest"]
    assert not recipe.check_optimal(broken)["passed"]
    assert not recipe.check_held(broken)["passed"]


def test_the_recorded_cases():
    cases = {c["id"]: c for c in json.loads(MANIFEST.read_text())["experiment"]["cases"]}
    items = {c: {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in cases[c][part]} for c in cases}
    greedy = items["greedy"]
    assert greedy["moves"]["value"] == 8 and greedy["return"]["value"] == pytest.approx(0.72)
    assert greedy["cells"]["values"][0] == [4, 0] and greedy["cells"]["values"][-1] == [0, 4]
    assert len(greedy["q_values"]["values"]) == 8 and greedy["q_values"]["columns"] == ["up", "right", "down", "left"]
    assert sum(items["explore"]["explored"]["values"]) >= 1  # ε = 0.3 made at least one random move
    policy = items["policy"]
    assert policy["agree"]["value"] == policy["cells"]["value"] == 19
    assert len(items["training"]["training_return"]["values"]) == train.EPISODES


def test_train_check_exits_0_on_the_stored_weights_and_1_on_a_changed_one(model, train_check, capsys, monkeypatch):
    """`train.py --check` on the stored weights standing in for a retraining (15 s: README)."""
    monkeypatch.setattr(train, "train", lambda settings: (model, [0.0]))
    assert train.main(["--check"]) == 0
    changed = dqn.build_model()
    with torch.no_grad():
        changed.values.fc.bias[0] += 0.01
    monkeypatch.setattr(train, "train", lambda settings: (changed, [0.0]))
    assert train.main(["--check"]) == 1
    assert "largest weight difference 1.00e-02" in capsys.readouterr().out


# ---- the lab (verification: tests/test_recordings.py)


def test_an_episode_from_any_open_cell_and_the_policy(module_client):
    answer = module_client.post("/api/models/dqn/episode", json={"start": [2, 2]}).get_json()
    case = {i["key"]: i for part in ("matrices", "vectors", "metrics") for i in answer["case"][part]}
    assert case["cells"]["values"] == [[2, 2], [1, 2], [0, 2], [0, 3], [0, 4]] and case["reached"]["value"] == 1
    exploring = module_client.post("/api/models/dqn/episode", json={"start": [2, 2], "epsilon": 1, "seed": 3})
    moves = {i["key"]: i for part in ("vectors",) for i in exploring.get_json()["case"][part]}
    assert all(moves["explored"]["values"])  # ε = 1: every move random
    policy = module_client.post("/api/models/dqn/policy", json={}).get_json()["case"]
    assert next(m for m in policy["matrices"] if m["key"] == "policy")["values"][4][0] in (UP, RIGHT)


@pytest.mark.parametrize(("body", "message"), [
    ({"start": [1, 1]}, "start: (1, 1) is a wall; start from an open cell"),
    ({"start": [0, 4]}, "start: (0, 4) is where an episode ends; start from an open cell"),
    ({"start": [5, 0]}, "start[0]: 5 is out of range 0..4"),
    ({"start": [0]}, "start: must hold exactly 2 values, not 1"),
    ({"start": [0, 0], "epsilon": 1.5}, "epsilon: 1.5 is out of range 0..1"),
])
def test_bad_requests_name_the_field(module_client, body, message):
    answer = module_client.post("/api/models/dqn/episode", json=body)
    assert answer.status_code == 400 and answer.get_json()["error"]["message"].startswith(message)
