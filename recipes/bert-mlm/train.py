"""Train the tiny BERT to fill in masked words of a small language this file makes, and its causal twin the same
way, and store both beside it.

    python train.py          # train both (under a minute on one CPU core), write weights.safetensors and
                             # causal.safetensors, print each one's held-out accuracy
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop).

The language: two sentences, "[CLS] a big dog barks [SEP] it barks loudly [SEP]". A determiner says one animal or
two; the noun, its verb and its adverb go with the animal (a dog barks loudly, a cat meows softly, a bird sings
sweetly), the verb agrees in number, and the second sentence's pronoun is "it" or "they". The adjective is free.
Every other word has one right answer given the rest of its sentence, and so does the sentence pair: it is IsNext
when the second sentence goes on about the first one's animals (the same animal and number), NotNext when it is
about another animal. Three adjective-animal pairs ("old dog", "young cat", "big bird") never appear in training:
the held-out sentences.
"""

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.masked_lm import mlm_loss, unpack
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import CAUSAL_WEIGHTS, MASK, WEIGHTS, WORDS, BertConfig, TinyBert

TRAIN_SEED = 2018  # initial weights and every draw of the training (BERT's year)
EPOCHS = 30
STEPS = 40  # batches per epoch
BATCH = 64
LEARNING_RATE = 3e-3
MASK_RATE, RANDOM_RATE = 0.8, 0.1  # of the selected words: replaced by [MASK], by a random word; the rest kept
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.5,
    "30 epochs of Adam amplify a last-bit difference: 0.079 apart seen on another vendor's processor",
    {
        "weights.safetensors:accuracy": training.Bound(0.05, "the held-out masked words: 2 of 36"),
        "weights.safetensors:nsp_accuracy": training.Bound(0.1, "the held-out sentence pairs: 1 of 10"),
        "causal.safetensors:accuracy": training.Bound(0.1, "the causal twin guesses: 4 of 36"),
    },
)

ID = {word: i for i, word in enumerate(WORDS)}
# Each animal's words: (singular noun, plural noun, singular verb, plural verb, adverb).
ANIMALS = (
    ("dog", "dogs", "barks", "bark", "loudly"),
    ("cat", "cats", "meows", "meow", "softly"),
    ("bird", "birds", "sings", "sing", "sweetly"),
)
ADJECTIVES = ("big", "small", "old", "young")
DETERMINERS = ("a", "two")  # by number: one, many
PRONOUNS = ("it", "they")
HELD_OUT = {("old", "dog"), ("young", "cat"), ("big", "bird")}  # adjective-animal pairs never trained on
SEGMENTS = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]  # sentence A up to and including the first [SEP], then B
ANSWERED = (1, 3, 4, 6, 7, 8)  # the positions the rest of a sentence decides: all words but the adjective
IS_NEXT, NOT_NEXT = 0, 1


@dataclass(frozen=True)
class Pair:
    ids: tuple[int, ...]  # (LENGTH,) token ids
    label: int  # IS_NEXT or NOT_NEXT
    held_out: bool  # sentence A's adjective and animal are a pair never trained on


def pair(number: int, adjective: str, animal: int, next_number: int, next_animal: int) -> Pair:
    """Sentence A about `number` (0 one, 1 two) animals of kind `animal`, and B going on about `next_number` of
    `next_animal`."""
    a, b = ANIMALS[animal], ANIMALS[next_animal]
    words = (
        "[CLS]",
        DETERMINERS[number],
        adjective,
        a[number],
        a[2 + number],
        "[SEP]",
        PRONOUNS[next_number],
        b[2 + next_number],
        b[4],
        "[SEP]",
    )
    label = IS_NEXT if (number, animal) == (next_number, next_animal) else NOT_NEXT
    return Pair(tuple(ID[w] for w in words), label, (adjective, a[0]) in HELD_OUT)


def pairs() -> list[Pair]:
    """Every sentence pair of the language: each sentence A with its continuation (IsNext) and with each sentence
    about another animal (NotNext): 24 and 96."""
    return [
        pair(number, adjective, animal, next_number, next_animal)
        for number in (0, 1)
        for adjective in ADJECTIVES
        for animal in range(len(ANIMALS))
        for next_animal in range(len(ANIMALS))
        for next_number in (0, 1)
        if next_animal != animal or next_number == number
    ]


def training_pairs() -> tuple[list[Pair], list[Pair]]:
    """The pairs trained on, (IsNext, NotNext): those whose sentence A is not held out."""
    kept = [p for p in pairs() if not p.held_out]
    return [p for p in kept if p.label == IS_NEXT], [p for p in kept if p.label == NOT_NEXT]


def corrupt(ids: tuple[int, ...], generator: torch.Generator) -> tuple[list[int], list[int]]:
    """BERT's corruption of one or two answered words (drawn by `generator`): the corrupted ids and the positions
    selected, each replaced by [MASK] (80%), a random word (10%) or kept (10%)."""
    count = 1 + int(torch.rand((), generator=generator) < 0.5)
    selected = sorted(ANSWERED[i] for i in torch.randperm(len(ANSWERED), generator=generator)[:count].tolist())
    corrupted = list(ids)
    for position in selected:
        draw = torch.rand((), generator=generator).item()
        if draw < MASK_RATE:
            corrupted[position] = MASK
        elif draw < MASK_RATE + RANDOM_RATE:
            corrupted[position] = 3 + int(torch.randint(len(WORDS) - 3, (), generator=generator))  # a word
    return corrupted, selected


def batch(generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """BATCH pairs, half IsNext and half NotNext on average: (inputs, targets, selected, labels), the first three
    (B, LENGTH) and the labels (B,)."""
    is_next, not_next = training_pairs()
    inputs, targets, selected, labels = [], [], [], []
    for _ in range(BATCH):
        pool = is_next if torch.rand((), generator=generator) < 0.5 else not_next
        chosen = pool[int(torch.randint(len(pool), (), generator=generator))]
        corrupted, positions = corrupt(chosen.ids, generator)
        inputs.append(corrupted)
        targets.append(chosen.ids)
        selected.append([i in positions for i in range(len(chosen.ids))])
        labels.append(chosen.label)
    return torch.tensor(inputs), torch.tensor(targets), torch.tensor(selected), torch.tensor(labels)


def pretraining_loss(
    model: TinyBert, inputs: Tensor, targets: Tensor, selected: Tensor, labels: Tensor, causal: bool
) -> Tensor:
    """Masked-word cross entropy over the selected positions, plus the sentence-pair cross entropy."""
    mlm_logits, nsp_logits = unpack(
        model(inputs, torch.tensor(SEGMENTS).expand_as(inputs), causal=causal), inputs.size(1)
    )  # (B, T, vocab), (B, 2)
    return mlm_loss(mlm_logits, targets, selected) + nn.functional.cross_entropy(nsp_logits, labels)


@torch.no_grad()
def accuracy(model: TinyBert, held: list[Pair], causal: bool) -> dict[str, float]:
    """On the pairs `held`: the share of answered words predicted right when each alone is masked (`accuracy`),
    and the share of pairs whose IsNext/NotNext is predicted right (`nsp_accuracy`)."""
    inputs, targets = [], []
    for p in held:
        for position in ANSWERED:
            masked = list(p.ids)
            masked[position] = MASK
            inputs.append(masked)
            targets.append((position, p.ids[position]))
    mlm_logits, _ = unpack(
        model(torch.tensor(inputs), torch.tensor(SEGMENTS).expand(len(inputs), -1), causal=causal), len(SEGMENTS)
    )  # (N, T, vocab)
    right = sum(int(mlm_logits[n, position].argmax()) == word for n, (position, word) in enumerate(targets))
    _, nsp_logits = unpack(
        model(torch.tensor([p.ids for p in held]), torch.tensor(SEGMENTS).expand(len(held), -1), causal=causal),
        len(SEGMENTS),
    )  # (pairs, 2)
    nsp_right = (nsp_logits.argmax(-1) == torch.tensor([p.label for p in held])).sum().item()
    return {"accuracy": right / len(targets), "nsp_accuracy": nsp_right / len(held)}


def held_out() -> list[Pair]:
    return [p for p in pairs() if p.held_out]


def train(causal: bool) -> training.Fitted:
    """AdamW on seeded batches, on one thread so that every machine sums alike; the held-out accuracy after
    every epoch. The same seed for both: the twins differ in their mask alone."""
    with training.one_thread(TRAIN_SEED):
        model = TinyBert(BertConfig())
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        generator = torch.Generator().manual_seed(TRAIN_SEED)
        return training.fit(
            model,
            optimizer,
            EPOCHS,
            lambda: (batch(generator) for _ in range(STEPS)),
            lambda b: pretraining_loss(model, *b, causal=causal),
            evaluate=lambda m: accuracy(m, held_out(), causal),
        )


def trained() -> training.Trained:
    files, said = {}, []
    for path, causal in ((WEIGHTS, False), (CAUSAL_WEIGHTS, True)):
        fitted = train(causal)
        measured = fitted.metrics[-1]
        # The tied decoder is the embedding, so it is stored once (as word_embeddings.weight).
        files[path] = (
            weights.state_of(fitted.model, leave_out=("mlm_decoder.weight",)),
            training.metadata(
                accuracy=measured["accuracy"],
                nsp_accuracy=measured["nsp_accuracy"],
                loss_per_epoch=fitted.losses,
                accuracy_per_epoch=[m["accuracy"] for m in fitted.metrics],
                train_seed=TRAIN_SEED,
                epochs=EPOCHS,
                attention="causal" if causal else "bidirectional",
            ),
        )
        said.append(
            f"{'causal' if causal else 'bidirectional'}: held-out accuracy {measured['accuracy']:.4f}, "
            f"sentence pairs {measured['nsp_accuracy']:.4f}, last loss {fitted.losses[-1]:.4f}"
        )
    return training.Trained(
        files=files,
        summary="; ".join(said),
        same={
            "the held-out sentences are never trained on": not any(
                p.held_out for group in training_pairs() for p in group
            )
        },
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
