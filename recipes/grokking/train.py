"""Train the one-layer transformer on modular addition until it groks, and store its weights beside it.

    python train.py          # train (about a minute on one CPU core), write weights.safetensors and
                             # embeddings.safetensors (the embedding after each round), print when it memorised the
                             # training sums and when it generalised to the held-out ones
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is made here: every sum
a + b mod 41 of two numbers below 41, split by a seeded shuffle into 840 to train on and 841 held out. Every step
reads all 840 (full batch), with a strong weight decay: the setting in which Power et al. saw grokking.
"""

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import EMBEDDINGS, EQUALS, WEIGHTS, GrokConfig, OneLayer

TRAIN_SEED = 2022  # initial weights and the split (Power et al.'s year)
TRAIN_SHARE = 0.5  # of the 1,681 sums, trained on; the rest held out
ROUNDS = 50  # a round is STEPS full-batch steps, then the accuracy on both halves and the embedding's spectrum
STEPS = 100
LEARNING_RATE = 3e-3
WEIGHT_DECAY = 1.0  # strong: what pulls the memorising solution towards the general one
KEY = 5  # the frequencies counted as the embedding's key ones
RETRAIN_TOLERANCE = 1e-3
ELSEWHERE = training.Elsewhere(
    1.0,
    "5,000 steps of AdamW amplify a last-bit difference in the sums, and grokking's sudden turn amplifies it more",
    {"test_accuracy": training.Bound(0.02, "the held-out sums: 17 of 841")},
)


def split(config: GrokConfig | None = None) -> tuple[Tensor, Tensor]:
    """Every pair (a, b) below p (p², 2), split by a seeded shuffle into (training, held-out)."""
    p = (config or GrokConfig()).p
    pairs = torch.cartesian_prod(torch.arange(p), torch.arange(p))
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(TRAIN_SEED))
    cut = int(TRAIN_SHARE * len(pairs))
    return pairs[order[:cut]], pairs[order[cut:]]


def inputs(pairs: Tensor) -> Tensor:
    """(N, 2) pairs -> (N, 3) sequences "a b =": what the model reads."""
    return torch.cat([pairs, torch.full((len(pairs), 1), EQUALS)], 1)


def answers(pairs: Tensor, p: int = GrokConfig.p) -> Tensor:
    return (pairs[:, 0] + pairs[:, 1]) % p


@torch.no_grad()
def accuracy(model: OneLayer, pairs: Tensor) -> float:
    return (model(inputs(pairs)).argmax(-1) == answers(pairs, model.config.p)).float().mean().item()


def spectrum(embedding: Tensor) -> Tensor:
    """How the embedding of the p numbers (p, C) divides among the frequencies 1 .. (p - 1) / 2 of a number's circle
    (the discrete Fourier transform along the numbers, every channel's power summed): each frequency's share of all
    but the constant part ((p - 1) / 2,)."""
    power = torch.fft.rfft(embedding.detach(), dim=0).abs().pow(2).sum(-1)  # (p // 2 + 1,)
    return power[1:] / power[1:].sum()


def train() -> tuple[training.Fitted, list[list[float]], Tensor]:
    """AdamW on the whole training half at every step, on one thread so that every machine sums alike: the model,
    the loss and both accuracies of every round, and the embedding's spectrum and the embedding itself after each
    ((rounds, p, C): what the lab reads a round's spectrum from)."""
    spectra: list[list[float]] = []
    embeddings: list[Tensor] = []
    with training.one_thread(TRAIN_SEED):
        model = OneLayer(GrokConfig())
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, betas=(0.9, 0.98)
        )
        seen, held = split()

        def measured(m: OneLayer) -> dict[str, float]:
            embeddings.append(m.embed.weight[: m.config.p].detach().clone())
            spectra.append(spectrum(embeddings[-1]).tolist())
            return {"train_accuracy": accuracy(m, seen), "test_accuracy": accuracy(m, held)}

        fitted = training.fit(
            model,
            optimizer,
            ROUNDS,
            lambda: [seen] * STEPS,
            lambda batch: nn.functional.cross_entropy(model(inputs(batch)), answers(batch)),
            evaluate=measured,
        )
    return fitted, spectra, torch.stack(embeddings)


def first_round(curve: list[float], level: float = 0.99) -> int | None:
    """The first round (from 1) at which a curve reaches `level`; None where it never does."""
    return next((r + 1 for r, v in enumerate(curve) if v >= level), None)


def trained() -> training.Trained:
    fitted, spectra, embeddings = train()
    train_curve = [m["train_accuracy"] for m in fitted.metrics]
    test_curve = [m["test_accuracy"] for m in fitted.metrics]
    memorised, generalised = first_round(train_curve), first_round(test_curve)
    key = torch.tensor(spectra[-1]).topk(KEY).indices.add(1).sort().values.tolist()
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    train_accuracy=train_curve[-1],
                    test_accuracy=test_curve[-1],
                    train_accuracy_per_round=train_curve,
                    test_accuracy_per_round=test_curve,
                    spectrum_per_round=spectra,
                    key_frequencies=key,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    rounds=ROUNDS,
                    steps=STEPS,
                ),
            ),
            EMBEDDINGS: ({"embedding_by_round": embeddings}, training.metadata(rounds=ROUNDS, steps=STEPS)),
        },
        summary=f"memorised (99% of the training sums) at round {memorised}, generalised (99% of the held-out ones) "
        f"at round {generalised} of {ROUNDS}; held-out accuracy {test_curve[-1]:.4f}; key frequencies {key}",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
