"""Train the digit-reversing Transformer on sequences this file generates, and store its weights beside it.

    python train.py          # train (a minute or two on one CPU core), write weights.safetensors, print the
                             # held-out exact-match rate
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch and safetensors. The data is made here: random digit sequences of 1 to 8 digits, each to be
written backwards and ended with </s>.
"""

import json
import sys

import torch
from torch import Tensor, nn

try:
    from .model import BOS, EOS, WEIGHTS, Transformer, TransformerConfig, greedy, read_weights
except ImportError:  # run as a script: python train.py
    from model import BOS, EOS, WEIGHTS, Transformer, TransformerConfig, greedy, read_weights

TRAIN_SEED = 2017  # initial weights, the training sequences and their order (Vaswani et al., 2017)
TEST_SEED = 1706  # the held-out sequences (arXiv:1706.03762)
LENGTHS = (1, 8)  # source lengths, both included; the recorded cases also try longer ones
TEST_SEQUENCES = 500
EPOCHS = 30
BATCHES = 100  # per epoch, each of BATCH sequences of one length (no padding needed)
BATCH = 64
WARMUP = 400  # steps of the paper's learning-rate schedule (section 5.3)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3


def digit_sequences(count: int, seed: int, lengths: tuple[int, int] = LENGTHS) -> list[list[int]]:
    """Random digit sequences of random lengths."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 10, (int(torch.randint(lengths[0], lengths[1] + 1, (), generator=generator)),),
                          generator=generator).tolist() for _ in range(count)]


def reversal(source: list[int]) -> list[int]:
    """What the model is trained to answer: the digits backwards, then </s>."""
    return [*reversed(source), EOS]


def pair(sources: Tensor) -> tuple[Tensor, Tensor]:
    """The decoder's input (<s> and the answer but its last token) and the answer, for sources (B, S)."""
    answer = torch.cat([sources.flip(1), torch.full((len(sources), 1), EOS)], 1)  # (B, S + 1)
    return torch.cat([torch.full((len(sources), 1), BOS), answer[:, :-1]], 1), answer


def schedule(step: int) -> float:
    """lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), the paper's warm-up then decay."""
    step = max(step, 1)
    return TransformerConfig.d_model ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


def by_length(sources: list[list[int]]) -> list[Tensor]:
    """The sources as batches (B, S) of one length each, shortest first."""
    return [torch.tensor([s for s in sources if len(s) == n]) for n in sorted({len(s) for s in sources})]


@torch.no_grad()
def exact_match(model: Transformer, sources: list[list[int]]) -> float:
    """The share of sources whose greedy decoding is exactly their reversal and its end."""
    right = sum(answer == reversal(source) for batch in by_length(sources)
                for source, answer in zip(batch.tolist(), greedy(model, batch), strict=True))
    return right / len(sources)


def state_of(model: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def train() -> tuple[Transformer, list[float]]:
    """Adam with the paper's schedule on batches of one length each, drawn from a seeded generator, on one
    thread so that every machine sums alike: the model and the mean training loss of every epoch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(TRAIN_SEED)
        model = Transformer(TransformerConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        data = torch.Generator().manual_seed(TRAIN_SEED)
        model.train()
        curve = []
        for _ in range(EPOCHS):
            losses = []
            for _ in range(BATCHES):
                length = int(torch.randint(LENGTHS[0], LENGTHS[1] + 1, (), generator=data))
                sources = torch.randint(0, 10, (BATCH, length), generator=data)  # (B, S)
                decoder_input, answer = pair(sources)  # (B, S + 1) each
                logits = model(sources, decoder_input)  # (B, S + 1, vocab)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), answer.flatten())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
                losses.append(loss.item())
            curve.append(sum(losses) / len(losses))
        return model.eval(), curve
    finally:
        torch.set_num_threads(threads)


def largest_difference(model: Transformer, weights=WEIGHTS) -> float:
    """How far a retrained model is from the stored weights: the largest |difference| of any tensor,
    infinite where the two hold other tensors or shapes."""
    retrained, stored = state_of(model), read_weights(weights)[0]
    if set(retrained) != set(stored) or any(retrained[k].shape != stored[k].shape for k in retrained):
        return float("inf")
    return max((retrained[k] - stored[k]).abs().max().item() for k in retrained)


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    model, curve = train()
    held_out = exact_match(model, digit_sequences(TEST_SEQUENCES, TEST_SEED))
    if "--check" in argv:
        worst = largest_difference(model)
        print(f"retrained held-out exact match {held_out:.4f} (stored {read_weights(WEIGHTS)[1].get('exact_match')});"
              f" largest weight difference {worst:.2e} (tolerance {RETRAIN_TOLERANCE:g})")
        return 0 if worst <= RETRAIN_TOLERANCE else 1
    from safetensors.torch import save_file

    save_file(state_of(model), str(WEIGHTS), metadata={
        "exact_match": repr(held_out), "loss_per_epoch": json.dumps(curve), "train_seed": str(TRAIN_SEED),
        "test_seed": str(TEST_SEED), "epochs": str(EPOCHS), "torch": torch.__version__})
    print(f"held-out exact match {held_out:.4f} of {TEST_SEQUENCES} sequences; loss per epoch "
          + ", ".join(f"{x:.3f}" for x in curve) + f"; wrote {WEIGHTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
