"""Train the GPT recipe to sort four digits, on problems this file generates, and store its weights beside it.

    python train.py          # train (about a minute on one CPU core), write weights.safetensors, print the
                             # held-out exact-match rate
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch and safetensors. The data is made here: every one of the 10,000 problems of four digits, split by a
seeded shuffle into 1,000 held out and 9,000 to train on, each followed by "=" and its digits in order.
"""

import json
import sys

import torch
from torch import Tensor, nn

try:
    from .model import DIGITS, EQUALS, GPT, WEIGHTS, GPTConfig, read_weights
except ImportError:  # run as a script: python train.py
    from model import DIGITS, EQUALS, GPT, WEIGHTS, GPTConfig, read_weights

TRAIN_SEED = 1337  # initial weights, the split and the order of the batches (nanoGPT's seed)
HELD_OUT = 1000  # problems never trained on
EPOCHS = 10
BATCH = 64
LEARNING_RATE = 3e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3


def problems() -> tuple[Tensor, Tensor]:
    """Every problem (10000, DIGITS), split into (training, held-out) by a seeded shuffle."""
    every = torch.cartesian_prod(*[torch.arange(10)] * DIGITS)  # (10000, DIGITS)
    order = torch.randperm(len(every), generator=torch.Generator().manual_seed(TRAIN_SEED))
    return every[order[HELD_OUT:]], every[order[:HELD_OUT]]


def held_out() -> Tensor:
    return problems()[1]


def solved(problem: Tensor) -> Tensor:
    """Problems (B, DIGITS) -> whole sequences (B, 2·DIGITS + 1): the problem, "=" and its digits in order."""
    return torch.cat([problem, torch.full((len(problem), 1), EQUALS), problem.sort(1).values], 1)


def answer_loss(logits: Tensor, sequences: Tensor) -> Tensor:
    """Cross entropy of the answer digits only, each predicted from everything before it: the problem's own
    digits are random, and nothing could predict them."""
    targets = sequences[:, 1:].clone()  # (B, 2·DIGITS): the token after each position
    targets[:, :DIGITS] = -100  # positions that predict a problem digit or "=": not scored
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


@torch.no_grad()
def greedy(model: GPT, problem: Tensor) -> Tensor:
    """The answer (B, DIGITS) written after "=" one token at a time, each the likeliest."""
    ids = torch.cat([problem, torch.full((len(problem), 1), EQUALS)], 1)
    for _ in range(DIGITS):
        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], 1)
    return ids[:, DIGITS + 1:]


@torch.no_grad()
def exact_match(model: GPT, problem: Tensor) -> float:
    """The share of problems whose answer is exactly their digits in order."""
    return (greedy(model, problem) == problem.sort(1).values).all(1).float().mean().item()


def state_of(model: nn.Module) -> dict[str, Tensor]:
    """The weights to store: the tied head is the embedding, so it is stored once (as wte.weight)."""
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}


def train() -> tuple[GPT, list[float]]:
    """AdamW on batches in a seeded order, on one thread so that every machine sums alike: the model and the
    mean training loss of every epoch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(TRAIN_SEED)
        model = GPT(GPTConfig())
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        training, _ = problems()
        order = torch.Generator().manual_seed(TRAIN_SEED)
        model.train()
        curve = []
        for _ in range(EPOCHS):
            losses = []
            for batch in torch.randperm(len(training), generator=order).split(BATCH):
                sequences = solved(training[batch])  # (B, 2·DIGITS + 1)
                loss = answer_loss(model(sequences[:, :-1]), sequences)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            curve.append(sum(losses) / len(losses))
        return model.eval(), curve
    finally:
        torch.set_num_threads(threads)


def largest_difference(model: GPT, weights=WEIGHTS) -> float:
    """How far a retrained model is from the stored weights: the largest |difference| of any tensor,
    infinite where the two hold other tensors or shapes."""
    retrained, stored = state_of(model), read_weights(weights)[0]
    if set(retrained) != set(stored) or any(retrained[k].shape != stored[k].shape for k in retrained):
        return float("inf")
    return max((retrained[k] - stored[k]).abs().max().item() for k in retrained)


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    model, curve = train()
    measured = exact_match(model, held_out())
    if "--check" in argv:
        worst = largest_difference(model)
        print(f"retrained held-out exact match {measured:.4f} (stored {read_weights(WEIGHTS)[1].get('exact_match')});"
              f" largest weight difference {worst:.2e} (tolerance {RETRAIN_TOLERANCE:g})")
        return 0 if worst <= RETRAIN_TOLERANCE else 1
    from safetensors.torch import save_file

    save_file(state_of(model), str(WEIGHTS), metadata={
        "exact_match": repr(measured), "loss_per_epoch": json.dumps(curve), "train_seed": str(TRAIN_SEED),
        "epochs": str(EPOCHS), "torch": torch.__version__})
    print(f"held-out exact match {measured:.4f} of {HELD_OUT} problems; loss per epoch "
          + ", ".join(f"{x:.3f}" for x in curve) + f"; wrote {WEIGHTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
