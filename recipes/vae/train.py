"""Train the variational autoencoder on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (seconds on one CPU core), write weights.safetensors and
                             # test_digits.safetensors, print the held-out loss
    python train.py --check  # retrain in memory and compare with the stored files; exit status 1 if they differ

Needs torch, scikit-learn (the data ships with it) and safetensors. Replaying the recipe afterwards needs
torch and safetensors: the held-out digits are stored beside the weights.
"""

import json
import sys

import torch
from torch import Tensor, nn

try:
    from .model import TEST_DIGITS, VAE, WEIGHTS, VAEConfig, loss_terms, pixels, read_weights
except ImportError:  # run as a script: python train.py
    from model import TEST_DIGITS, VAE, WEIGHTS, VAEConfig, loss_terms, pixels, read_weights

SPLIT_SEED = 0  # the permutation that picks the test digits (the same split as the LeNet recipe's)
TRAIN_SEED = 2013  # initial weights, batch order and the sampled noise (Kingma & Welling, 2013)
TEST_SIZE = 360  # of the 1,797 digits; the other 1,437 train
EPOCHS = 200
BATCH = 32
LEARNING_RATE = 3e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3


def split_digits() -> dict[str, Tensor]:
    """The fixed, seeded train/test split of scikit-learn's digits: grey levels 0..16 as uint8."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.uint8)  # (1797, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.int64)  # (1797,)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, train = order[:TEST_SIZE].sort().values, order[TEST_SIZE:]
    return {"train_images": images[train], "train_labels": labels[train],
            "test_images": images[test], "test_labels": labels[test], "test_indices": test}


@torch.no_grad()
def held_out(model: VAE, images: Tensor) -> dict[str, float]:
    """The mean negative ELBO and its two terms over held-out images, with z = μ (no sampling)."""
    loss, reconstruction, kl = loss_terms(model, pixels(images))
    return {"loss": loss.mean().item(), "reconstruction": reconstruction.mean().item(), "kl": kl.mean().item()}


def state_of(model: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def train(split: dict[str, Tensor]) -> tuple[VAE, list[float]]:
    """Adam on mini-batches in a seeded order, each image's code sampled with seeded noise (one sample per
    image, as the paper's L = 1), minimising the negative ELBO, on one thread so that every machine sums
    alike: the model and the mean training loss of every epoch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(TRAIN_SEED)
        model = VAE(VAEConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        order = torch.Generator().manual_seed(TRAIN_SEED)
        x = pixels(split["train_images"])
        model.train()
        curve = []
        for _ in range(EPOCHS):
            losses = []
            for batch in torch.randperm(len(x), generator=order).split(BATCH):
                noise = torch.randn(len(batch), model.config.latent, generator=order)
                loss = loss_terms(model, x[batch], noise)[0].mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            curve.append(sum(losses) / len(losses))
        return model.eval(), curve
    finally:
        torch.set_num_threads(threads)


def largest_difference(model: VAE, weights=WEIGHTS) -> float:
    """How far a retrained model is from the stored weights: the largest
    |difference| of any tensor, infinite where the two hold other tensors or shapes."""
    retrained, stored = state_of(model), read_weights(weights)[0]
    if set(retrained) != set(stored) or any(retrained[k].shape != stored[k].shape for k in retrained):
        return float("inf")
    return max((retrained[k].double() - stored[k].double()).abs().max().item() for k in retrained)


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    split = split_digits()
    model, curve = train(split)
    test = held_out(model, split["test_images"])
    if "--check" in argv:
        worst = largest_difference(model)
        stored_test, _ = read_weights(TEST_DIGITS)
        same_split = all(torch.equal(stored_test[k], split[k]) for k in ("test_images", "test_labels", "test_indices"))
        stored = read_weights(WEIGHTS)[1].get("test_loss")
        print(f"retrained held-out loss {test['loss']:.4f} (stored {stored}); largest weight difference "
              f"{worst:.2e} (tolerance {RETRAIN_TOLERANCE:g}); same test split: {same_split}")
        return 0 if worst <= RETRAIN_TOLERANCE and same_split else 1
    from safetensors.torch import save_file

    save_file(state_of(model), str(WEIGHTS), metadata={
        "test_loss": repr(test["loss"]), "test_reconstruction": repr(test["reconstruction"]),
        "test_kl": repr(test["kl"]), "loss_per_epoch": json.dumps(curve), "train_seed": str(TRAIN_SEED),
        "split_seed": str(SPLIT_SEED), "epochs": str(EPOCHS), "torch": torch.__version__})
    source = "scikit-learn load_digits (UCI Optical Recognition of Handwritten Digits, CC BY 4.0)"
    save_file({k: split[k] for k in ("test_images", "test_labels", "test_indices")}, str(TEST_DIGITS),
              metadata={"source": source})
    print(f"held-out negative ELBO {test['loss']:.3f} (reconstruction {test['reconstruction']:.3f}, KL "
          f"{test['kl']:.3f}) on {TEST_SIZE} digits; loss per epoch "
          + ", ".join(f"{x:.3f}" for x in curve) + f"; wrote {WEIGHTS.name} and {TEST_DIGITS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
