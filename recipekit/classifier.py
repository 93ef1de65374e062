"""What every digit classifier's cases say alike (LeNet, the ResNet, the ViT): the digit read, how sure, and the
whole held-out split's accuracy, loss and confusion. A recipe adds what is its own (feature maps, attention)."""

import torch
from torch import Tensor, nn

from . import digits
from .items import matrix, metric, vector


def read_as(logits: Tensor, label: int | None = None) -> tuple[list[dict], list[dict]]:
    """One image's logits (classes,): the class probabilities and the logits (vectors); the digit read and its
    probability, and with a label the true digit and the cross entropy against it (metrics)."""
    logits = logits.detach()
    probs = logits.softmax(-1)
    predicted = int(logits.argmax())
    vectors = [
        vector("probabilities", "Class probabilities (digits 0-9)", probs),
        vector("logits", "Logits (digits 0-9)", logits),
    ]
    metrics = [
        metric("prediction", "Read as", predicted),
        metric("confidence", "Probability of the digit read", probs[predicted].item()),
    ]
    if label is not None:
        loss = nn.functional.cross_entropy(logits[None], torch.tensor([label]))
        metrics += [
            metric("label", "True digit", label),
            metric("loss", "Cross entropy against the true digit", loss.item()),
        ]
    return vectors, metrics


def held_out_case(logits: Tensor, labels: Tensor, training_loss: list[float] | None = None) -> dict:
    """The whole held-out split, from its logits (N, classes) and labels (N,): accuracy, mean loss, accuracy per
    digit and the confusion matrix; with `training_loss`, train.py's curve (one mean per epoch)."""
    predicted = logits.argmax(-1)
    classes = logits.size(-1)
    confusion = torch.zeros(classes, classes, dtype=torch.int64)
    confusion.index_put_((labels, predicted), torch.ones_like(labels), accumulate=True)
    per_class = confusion.diag().double() / confusion.sum(1).double()
    vectors = [vector("class_accuracy", "Accuracy per true digit (0-9)", per_class)]
    if training_loss is not None:
        vectors.append(
            vector("training_loss", "Mean training loss in each epoch, as train.py measured it", training_loss, first=1)
        )
    return {
        "label": "All held-out test digits",
        "matrices": [matrix("confusion", "Confusion: true digit (rows) × digit read (columns)", confusion)],
        "vectors": vectors,
        "metrics": [
            metric("test_accuracy", "Test accuracy", digits.accuracy(predicted, labels)),
            metric(
                "test_loss", "Mean cross entropy on the test split", nn.functional.cross_entropy(logits, labels).item()
            ),
            metric("test_size", "Test digits", len(labels)),
        ],
    }
