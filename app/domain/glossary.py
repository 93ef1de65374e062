"""The words a page uses that a newcomer may not know, each said plainly once; the page shows them on hover and
focus wherever the word appears (static/js/glossary.js finds them). A model's own symbols (ε, β_t, Q(s, a)) are its
recipe's to say, in recipe.toml's [glossary], which the page adds to these."""

# A term is matched as a whole word (or with a plural s), letter case as written where it has capitals (ELBO, KL), else
# in any case.
GLOSSARY: dict[str, str] = {
    "activation × gradient": "An attribution: each input times how fast the answer's score changes with it. A "
                             "first-order estimate of how much that input adds to the score.",
    "atol": "Absolute tolerance: the difference a replayed number may have from the recorded one whatever its "
            "size (with rtol, the allowance is atol + rtol × |recorded|).",
    "attention": "How much each position takes from every other when it builds its next representation: one "
                 "weight per pair, each row summing to one.",
    "attribution": "A share of a prediction given to each input or part of the model: which parts the answer "
                   "rests on.",
    "cross entropy": "The loss of a prediction: minus the log of the probability the model gave the right answer. "
                     "0 when it was certain and right; it grows without limit as it is confidently wrong.",
    "ELBO": "Evidence lower bound: what a variational autoencoder maximises. Its negative is the reconstruction "
            "loss plus the KL term, in nats.",
    "embedding": "A learned vector that stands for a token, a position or a whole input: the numbers the rest "
                 "of the model computes with.",
    "GELU": "Gaussian error linear unit: an activation that lets a value through in proportion to how likely a "
            "standard normal variable is below it (near 0 for negative values, near x for large ones).",
    "KL": "Kullback–Leibler divergence: how far one probability distribution is from another, in nats; 0 when "
          "they are the same.",
    "LayerNorm": "Layer normalisation: each vector shifted to mean 0 and scaled to variance 1, then scaled and "
                 "shifted by learned weights.",
    "logit lens": "Reading the model's prediction early: the final normalisation and the output layer applied "
                  "to the residual stream after each block, as if the model stopped there.",
    "logit": "The scores a model gives each class or token before softmax turns them into probabilities.",
    "nats": "A unit of information with natural logarithms: 1 nat is about 1.44 bits.",
    "residual stream": "The running sum each block of a transformer reads from and adds its output to: what "
                       "carries information from layer to layer.",
    "rtol": "Relative tolerance: the difference a replayed number may have from the recorded one, as a share of "
            "the recorded value (with atol, the allowance is atol + rtol × |recorded|).",
    "BatchNorm": "Batch normalisation: each channel shifted to mean 0 and scaled to variance 1 with the statistics "
                 "learnt in training, then scaled and shifted by learned weights.",
    "decision regions": "The parts of the input plane where the network answers 1, and where it answers 0: the "
                        "line between them is where its answer crosses 0.5.",
    "saliency": "How much each input pixel moves the answer's score: here, each pixel times the gradient of "
                "the score with respect to it.",
    "softmax": "Turns scores into probabilities: e raised to each score, divided by the sum of them all, so "
               "every one is positive and they add up to one.",
}
