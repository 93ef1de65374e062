"""Train the attention-only transformer on repeated random sequences, and store its weights beside it.

    python train.py          # train (about half a minute on one CPU core), write weights.safetensors, print the
                             # held-out scores
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is made here, fresh for every
step from a seeded generator: each sequence is random letters in which a random run of letters stands twice in a
row, anywhere. The run's length varies from sequence to sequence, so no fixed offset finds the earlier copy: only a
head that looks for "the letter after the last time this letter appeared" predicts the repeat.
"""

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import WEIGHTS, AttentionOnly, InductionConfig

LETTERS = "abcdefghijklmnopqrstuvwxyz"  # the vocabulary: token t is LETTERS[t]
TRAIN_SEED = 2022  # initial weights and every training sequence (the paper's year)
HELD_OUT_SEED = 7  # the held-out sequences the scores are measured on, never trained on
HELD_OUT = 256
SHORTEST, LONGEST = 6, 14  # the repeated run's length, drawn for each sequence
ROUNDS = 40  # a round is STEPS gradient steps, then the held-out scores
STEPS = 50
BATCH = 32
LEARNING_RATE = 3e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
ELSEWHERE = training.Elsewhere(
    1.0,
    "2,000 steps of AdamW amplify a last-bit difference in the sums",
    {
        "second_half_loss": training.Bound(0.1, "a mean of 2,000 cross entropies of a model that has learnt the task"),
        "induction_score": training.Bound(0.1, "a mean attention weight of the best layer-2 head"),
    },
)


def sequences(count: int, generator: torch.Generator, config: InductionConfig | None = None) -> tuple[Tensor, Tensor]:
    """`count` sequences (count, T) of random letters in each of which a run of L letters stands twice in a row,
    anywhere, and where (count, 2): the first copy's start and L. The first copy stands at [start, start + L), the
    second at [start + L, start + 2L)."""
    config = config or InductionConfig()
    T = config.block_size
    tokens = torch.randint(config.vocab_size, (count, T), generator=generator)
    lengths = torch.randint(SHORTEST, LONGEST + 1, (count,), generator=generator)
    starts = (torch.rand(count, generator=generator) * (T - 2 * lengths + 1)).long()  # uniform in [0, T - 2L]
    for row, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        tokens[row, start + length : start + 2 * length] = tokens[row, start : start + length]
    return tokens, torch.stack([starts, lengths], 1)


def held_out() -> tuple[Tensor, Tensor]:
    return sequences(HELD_OUT, torch.Generator().manual_seed(HELD_OUT_SEED))


def patterns(model: AttentionOnly, tokens: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Logits (B, T, vocab) and each layer's attention pattern (B, heads, T, T), read by hooks on the softmax."""
    captured: list[Tensor] = []
    hooks = [layer.softmax.register_forward_hook(lambda _m, _a, out: captured.append(out)) for layer in model.layers]
    try:
        logits = model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, captured


def scores(logits: Tensor, attention: list[Tensor], tokens: Tensor, runs: Tensor) -> dict[str, Tensor]:
    """What the paper measures, per head and on the two copies of each sequence's run (`runs`: start and length, as
    sequences() gives them): the mean attention of each head of the last layer from a letter of the second copy to
    the letter after its earlier copy (the induction score: query start + L + j reads A[j], and A[j + 1] stands at
    start + j + 1), of each head of the first layer to the letter just before (the previous-token score, over every
    position), and the next-letter loss of the run's letters the second time against the first."""
    losses = nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, T-1)
    first, second, induction = [], [], []
    for row, (start, length) in enumerate(runs.tolist()):
        queries = [start + length + j for j in range(length - 1)]  # the second copy, but for its last letter
        first.append(losses[row, start : start + length - 1])  # predicting A[1..L-1] the first time: a guess
        second.append(losses[row, queries])  # predicting them again
        induction.append(attention[-1][row][:, queries, [q - length + 1 for q in queries]])  # (heads, L-1)
    previous = attention[0].diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, heads, T-1): each query to the token before
    return {
        "induction": torch.cat(induction, 1).mean(1),  # (heads,)
        "previous_token": previous.mean((0, 2)),  # (heads,)
        "first_half_loss": torch.cat(first).mean(),
        "second_half_loss": torch.cat(second).mean(),
    }


@torch.no_grad()
def measured(model: AttentionOnly, tokens: Tensor | None = None, runs: Tensor | None = None) -> dict[str, float]:
    """The held-out figures: the best heads' scores and the two copies' losses."""
    if tokens is None or runs is None:
        tokens, runs = held_out()
    logits, attention = patterns(model, tokens)
    found = scores(logits, attention, tokens, runs)
    return {
        "induction_score": found["induction"].max().item(),
        "previous_token_score": found["previous_token"].max().item(),
        "first_half_loss": found["first_half_loss"].item(),
        "second_half_loss": found["second_half_loss"].item(),
    }


def next_token_loss(logits: Tensor, tokens: Tensor) -> Tensor:
    """Cross entropy of every position's prediction against the token after it: the random tokens too, which no
    model predicts (their loss stays near ln 26 = 3.26 nats)."""
    return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def train() -> training.Fitted:
    """AdamW on fresh sequences from a seeded generator, on one thread so that every machine sums alike: the model,
    the mean training loss of every round and the held-out figures after it."""
    with training.one_thread(TRAIN_SEED):
        model = AttentionOnly(InductionConfig())
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        data = torch.Generator().manual_seed(TRAIN_SEED)
        tokens, runs = held_out()

        def loss_of(batch: Tensor) -> Tensor:
            return next_token_loss(model(batch), batch)

        return training.fit(
            model,
            optimizer,
            ROUNDS,
            lambda: [sequences(BATCH, data)[0] for _ in range(STEPS)],
            loss_of,
            evaluate=lambda m: measured(m, tokens, runs),
        )


def trained() -> training.Trained:
    fitted = train()
    final = fitted.metrics[-1]
    curves = {f"{name}_per_round": [m[name] for m in fitted.metrics] for name in final}
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    **final, **curves, loss_per_epoch=fitted.losses, train_seed=TRAIN_SEED, rounds=ROUNDS, steps=STEPS
                ),
            )
        },
        summary=f"held-out: induction score {final['induction_score']:.3f}, previous-token score "
        f"{final['previous_token_score']:.3f}, loss {final['first_half_loss']:.3f} nats on the first copy and "
        f"{final['second_half_loss']:.3f} on the second",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
