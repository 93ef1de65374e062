"""Train the bracket-counting LSTM on strings this file generates, and store its weights beside it.

    python train.py          # train (seconds on one CPU core), write weights.safetensors and
                             # snapshots.safetensors, print the held-out accuracy
    python train.py --check  # retrain in memory and compare with the stored files; exit status 1 if they differ

Needs torch and safetensors. The data is made here: random strings of brackets that never close more than
they opened and never nest deeper than 8, each token labelled with the depth it leaves.
"""

import json
import sys
from pathlib import Path

import torch
from torch import Tensor, nn

try:
    from .model import SNAPSHOTS, WEIGHTS, BracketLSTM, LSTMConfig, depths_of, read_weights
except ImportError:  # run as a script: python train.py
    from model import SNAPSHOTS, WEIGHTS, BracketLSTM, LSTMConfig, depths_of, read_weights

TRAIN_SEED = 1997  # initial weights, the training strings and their order (Hochreiter & Schmidhuber, 1997)
TEST_SEED = 2000  # the held-out strings (Gers et al., 2000)
TRAIN_STRINGS, TEST_STRINGS = 2000, 500
LENGTHS = (2, 20)  # string lengths, both included; the recorded cases also try longer ones
EPOCHS = 15
BATCH = 32
LEARNING_RATE = 1e-2
SNAPSHOT_EPOCHS = (0, 1, 3, 10)  # the weights kept on the way (0 is the initialisation)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3


def bracket_strings(count: int, seed: int, lengths: tuple[int, int] = LENGTHS,
                    deepest: int = LSTMConfig.depths - 1) -> list[list[int]]:
    """Random strings of brackets (0 opens, 1 closes) that never go below depth 0 nor above `deepest`."""
    generator = torch.Generator().manual_seed(seed)
    strings = []
    for _ in range(count):
        length = int(torch.randint(lengths[0], lengths[1] + 1, (), generator=generator))
        depth, tokens = 0, []
        for _ in range(length):
            opens = depth == 0 or (depth < deepest and bool(torch.rand((), generator=generator) < 0.5))
            tokens.append(0 if opens else 1)
            depth += 1 if opens else -1
        strings.append(tokens)
    return strings


def batch_of(strings: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Tokens (B, T) padded with 0 and depths (B, T) padded with -100, which the loss ignores."""
    longest = max(map(len, strings))
    tokens = torch.zeros(len(strings), longest, dtype=torch.int64)
    depths = torch.full((len(strings), longest), -100, dtype=torch.int64)
    for row, string in enumerate(strings):
        tokens[row, :len(string)] = torch.tensor(string)
        depths[row, :len(string)] = torch.tensor(depths_of(string))
    return tokens, depths


@torch.no_grad()
def scores(model: BracketLSTM, strings: list[list[int]]) -> dict[str, float]:
    """Held-out accuracy per token, and the share of strings whose every depth is right."""
    tokens, depths = batch_of(strings)
    right = (model(tokens).argmax(-1) == depths) | (depths == -100)
    counted = depths != -100
    return {"token_accuracy": (right & counted).sum().item() / counted.sum().item(),
            "string_accuracy": right.all(1).float().mean().item()}


def state_of(model: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def train() -> tuple[BracketLSTM, dict[int, dict[str, Tensor]], list[float]]:
    """Adam on mini-batches in a seeded order, on one thread so that every machine sums alike: the model,
    its weights after each of SNAPSHOT_EPOCHS, and the mean training loss of every epoch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(TRAIN_SEED)
        model = BracketLSTM(LSTMConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        strings = bracket_strings(TRAIN_STRINGS, TRAIN_SEED)
        order = torch.Generator().manual_seed(TRAIN_SEED)
        model.train()
        snapshots, curve = {}, []
        for epoch in range(EPOCHS):
            if epoch in SNAPSHOT_EPOCHS:
                snapshots[epoch] = state_of(model)
            losses = []
            for batch in torch.randperm(len(strings), generator=order).split(BATCH):
                tokens, depths = batch_of([strings[i] for i in batch])
                loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), depths.flatten())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            curve.append(sum(losses) / len(losses))
        return model.eval(), snapshots, curve
    finally:
        torch.set_num_threads(threads)


def largest_difference(model: BracketLSTM, snapshots: dict[int, dict[str, Tensor]], weights: Path,
                       kept: Path) -> float:
    """How far a retrained model and its snapshots are from the stored files: the largest |difference| of any
    tensor, infinite where the two hold other tensors or shapes."""
    retrained = state_of(model) | {f"epoch-{e}/{k}": v for e, state in snapshots.items() for k, v in state.items()}
    stored = read_weights(weights)[0] | read_weights(kept)[0]
    if set(retrained) != set(stored) or any(retrained[k].shape != stored[k].shape for k in retrained):
        return float("inf")
    return max((retrained[k] - stored[k]).abs().max().item() for k in retrained)


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    model, snapshots, curve = train()
    held_out = scores(model, bracket_strings(TEST_STRINGS, TEST_SEED))
    state = state_of(model)
    kept = {f"epoch-{epoch}/{k}": v for epoch, weights in snapshots.items() for k, v in weights.items()}
    if "--check" in argv:
        worst = largest_difference(model, snapshots, WEIGHTS, SNAPSHOTS)
        print(f"retrained held-out accuracy {held_out['token_accuracy']:.4f} per token "
              f"(stored {read_weights(WEIGHTS)[1].get('token_accuracy')}); largest weight difference {worst:.2e} "
              f"(tolerance {RETRAIN_TOLERANCE:g})")
        return 0 if worst <= RETRAIN_TOLERANCE else 1
    from safetensors.torch import save_file

    save_file(state, str(WEIGHTS), metadata={
        "token_accuracy": repr(held_out["token_accuracy"]), "string_accuracy": repr(held_out["string_accuracy"]),
        "loss_per_epoch": json.dumps(curve), "train_seed": str(TRAIN_SEED), "test_seed": str(TEST_SEED),
        "epochs": str(EPOCHS), "torch": torch.__version__})
    stages = [{"id": f"epoch-{epoch}", "label": "at initialisation" if epoch == 0 else
               f"after {epoch} epoch{'s' if epoch > 1 else ''}"} for epoch in SNAPSHOT_EPOCHS]
    save_file(kept, str(SNAPSHOTS), metadata={"stages": json.dumps(stages),
                                              "trained": f"after {EPOCHS} epochs (the recorded weights)"})
    print(f"held-out accuracy {held_out['token_accuracy']:.4f} per token, {held_out['string_accuracy']:.4f} of "
          f"{TEST_STRINGS} strings wholly right; wrote {WEIGHTS.name} and {SNAPSHOTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
