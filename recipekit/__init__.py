"""The recipe kit: what every recipe would otherwise copy, written once.

    from recipekit import checkpoints, digits, replay, training, weights

`weights` reads and writes safetensors files with their metadata and measures how far two sets of weights are
apart; `digits` is scikit-learn's 8x8 digits, split once, and the held-out split stored with the kit; `training`
is the seeded one-thread training loop with its per-epoch metrics and train.py's main (`--check` included);
`replay` is run.py's replay of every case or of one, and its main; `checkpoints` reads a pretrained checkpoint in the
Hugging Face layout (config.json, the weights file mapped onto a recipe's modules, the size check against the
recipe process's memory) and keeps one loaded per process. A recipe that imports the kit has the kit's
files hashed into the key of everything it answers, so that a change to the kit re-verifies it.

Importing the package imports nothing else: each module brings torch (and safetensors where it reads weights)
when it is imported.
"""
