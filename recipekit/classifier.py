"""What every digit classifier's cases and traces say alike (LeNet, the ResNet, the ViT): the digit read, how sure,
the whole held-out split's accuracy, loss and confusion, and a class's logit taken apart at the last layer and
attributed stage by stage. A recipe adds what is its own (feature maps, attention, which stages it traces)."""

import torch
from torch import Tensor, nn

from . import digits
from .items import loss_curve, matrix, metric, vector


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


def held_out_case(logits: Tensor, labels: Tensor, metadata: dict[str, str] | None = None) -> dict:
    """The whole held-out split, from its logits (N, classes) and labels (N,): accuracy, mean loss, accuracy per
    digit and the confusion matrix; with the weights' `metadata`, train.py's loss curve (loss_curve)."""
    predicted = logits.argmax(-1)
    classes = logits.size(-1)
    confusion = torch.zeros(classes, classes, dtype=torch.int64)
    confusion.index_put_((labels, predicted), torch.ones_like(labels), accumulate=True)
    per_class = confusion.diag().double() / confusion.sum(1).double()
    vectors = [vector("class_accuracy", "Accuracy per true digit (0-9)", per_class)]
    if metadata is not None:
        vectors.append(loss_curve(metadata))
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


def logit_head(layer: nn.Linear, features: Tensor, logits: Tensor, target: int, noun: str = "class") -> dict:
    """The class `target`'s logit taken apart at the last layer, exactly: the features (in,) the linear `layer`
    reads, its weights for the class, their products (each unit's share), the five largest shares, and the sum of the
    shares and the bias (the logit again, as `check`)."""
    probs = logits.detach().softmax(-1)
    weights = layer.weight[target].detach()  # (in,)
    contributions = weights * features
    order = contributions.abs().argsort(descending=True).tolist()
    return {
        "id": "logit",
        "title": f"Logit of {noun} {target}",
        "logit": logits[target].item(),
        "bias": layer.bias[target].item(),
        "probability": probs[target].item(),
        "weights": weights.tolist(),
        "hidden": features.tolist(),
        "contributions": contributions.tolist(),
        "strongest": [
            {
                "unit": j,
                "weight": weights[j].item(),
                "activation": features[j].item(),
                "contribution": contributions[j].item(),
            }
            for j in order[:5]
        ],
        "check": (contributions.sum() + layer.bias[target]).item(),
    }


def traced_stage(stage_id: str, title: str, activation: Tensor, grad: Tensor) -> dict:
    """One stage of a trace: what it holds, and activation × gradient of the class's logit, per unit and summed per
    channel (for maps: (channels, H, W))."""
    attribution = activation * grad
    entry = {
        "id": stage_id,
        "title": title,
        "shape": list(activation.shape),
        "activation": activation.tolist(),
        "attribution": attribution.tolist(),
        "total": attribution.sum().item(),
    }
    if activation.dim() == 3:
        entry["channel_totals"] = attribution.sum((1, 2)).tolist()
    return entry
