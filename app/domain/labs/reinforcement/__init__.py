"""The reinforcement lab kind: an agent in a grid. Play an episode from any open cell, greedy or exploring, step by
step with the value Q(s, a) of every move at every state; and see the greedy policy over the whole grid, each
cell filled by the return the agent expects from it. The moves are named by `lab.names` ("up", "right", ...)."""

from ...numbers import in_prose
from ..cases import metrics, vectors
from ..fields import DeclarationError
from ..kind import LabKind, Reads, check_names

ARROWS = {"up": "↑", "right": "→", "down": "↓", "left": "←"}  # a move by its name, as the grid and the chips draw it


class Reinforcement(LabKind):
    name = "reinforcement"
    requires = {"sizes": ("side", "actions"), "endpoints": ("episode", "policy")}
    limits = {"episode": {"start": "A wall, the goal or the pit is refused: an episode starts on an open cell (the "
                                    "policy's answer maps the grid)."}}
    reads = {
        "episode": Reads(items=("q_values", "cells", "path", "map", "actions", "explored", "rewards", "start",
                                "return", "moves", "reached", "fell")),
        "policy": Reads(items=("values", "policy", "q_values", "optimal", "map", "agree", "cells")),
    }

    def check(self, spec) -> None:
        """An episode takes a start cell [row, column] within the grid, ε from 0 to 1 and a seed; every move is
        named."""
        fields = spec.endpoints["episode"].fields
        start, epsilon, seed = fields.get("start"), fields.get("epsilon"), fields.get("seed")
        if start is None or start.type != "ints" or start.length != 2 or start.max != spec.sizes["side"] - 1:
            raise DeclarationError(f"lab.endpoints.episode of a {self.name} lab needs a `start` field of 2 ints "
                                   "below the side")
        if epsilon is None or epsilon.type != "number" or (epsilon.min, epsilon.max) != (0, 1):
            raise DeclarationError(f"lab.endpoints.episode of a {self.name} lab needs an `epsilon` number from 0 to 1")
        if seed is None or seed.type != "int":
            raise DeclarationError(f"lab.endpoints.episode of a {self.name} lab needs a `seed` int field")
        if not spec.names:
            raise DeclarationError(f"lab.names: a {self.name} lab names each move")
        check_names(spec, "actions", "moves")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded episode as the request that plays it again (its start, ε and seed); the recorded policy as
        the policy's request."""
        presets = []
        for case in cases:
            found, start = metrics(case), vectors(case).get("start")
            if start is not None and "epsilon" in found and "seed" in found:
                request = {"start": [int(v) for v in start], "epsilon": found["epsilon"], "seed": int(found["seed"])}
                presets.append({"id": case["id"], "label": case["label"], "endpoint": "episode", "request": request})
            elif any(m["key"] == "policy" for m in case.get("matrices", [])):
                presets.append({"id": case["id"], "label": case["label"], "endpoint": "policy", "request": {}})
        return presets


    def vector_names(self, case: dict, spec) -> dict[str, list[str]]:
        """The moves an episode made, by name (`names`: up, right, ...), not by their codes."""
        found = super().vector_names(case, spec)
        actions = vectors(case).get("actions")
        if actions is not None and spec.names:
            found["actions"] = [self.arrowed(spec.token_name(int(a))) for a in actions]
        return found

    @staticmethod
    def arrowed(move: str) -> str:
        """“↑ up”: a move's arrow beside its name, where the move is one of the four a grid has."""
        return f"{ARROWS[move]} {move}" if move in ARROWS else move

    def settings(self, spec) -> dict:
        """Each move's arrow (the grid's cells) and its arrow beside its name (the episode's table and steps)."""
        return {"arrows": [ARROWS.get(move, "") for move in spec.names],
                "arrowed": [self.arrowed(move) for move in spec.names]}

    def outcome(self, case: dict, spec) -> str | None:
        """An episode: “From row 4, column 0: 8 moves, return 0.72, the goal reached”; the policy: how many cells'
        greedy moves are optimal."""
        found, counts = vectors(case), metrics(case)
        if "greedy_return" in counts and found.get("training_return"):  # the training episodes
            returns = found["training_return"]
            recent = (f" to {in_prose(counts['last_50'], 2)} on average over the last 50" if "last_50" in counts
                      else "")
            return (f"Over {len(returns):,} training episodes the return went from {in_prose(returns[0], 2)} in the "
                    f"first{recent}; played greedily from the start, the trained agent's return is "
                    f"{in_prose(counts['greedy_return'], 2)}.")
        if "agree" in counts and "cells" in counts:
            return f"The greedy move is an optimal one in {counts['agree']} of {counts['cells']} cells."
        if "actions" not in found or "return" not in counts:
            return None
        start = found.get("start", [])
        where = f"From row {start[0]}, column {start[1]}: " if len(start) == 2 else ""
        end = ("the goal reached" if counts.get("reached") == 1 else "into the pit" if counts.get("fell") == 1
               else "cut off before the goal")
        moves = len(found["actions"])
        return f"{where}{moves} move{'s' if moves != 1 else ''}, return {in_prose(counts['return'], 3)}, {end}."


KIND = Reinforcement()
