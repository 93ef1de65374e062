"""Pretrained checkpoints in the Hugging Face layout, as the recipes that read one load them: config.json, the
weights file, the size check against the recipe process's memory cap, one loaded checkpoint kept per process, and
the errors a request or a checkpoint gets (the kit's refusals: recipekit/refusals.py)."""

import json
import resource
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .refusals import Refused, Unavailable

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # looked for in this order
SIGNIFICANT = 8  # digits kept of the values an answer lists: about float32's own precision


class CheckpointError(Unavailable):
    """The checkpoint folder cannot be used (the server's checkpoint, not the request, is at fault); the message
    names the file and the problem."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"the checkpoint cannot be used: {problem}")


class InputError(Refused):
    """The request cannot be run; the message starts with the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def values(t: Tensor) -> Any:
    """A tensor's values to 8 significant digits: half the JSON of full doubles, for arrays of thousands."""
    t = t.double()
    scale = 10.0 ** (SIGNIFICANT - 1 - t.abs().clamp_min(1e-30).log10().floor())
    return ((t * scale).round() / scale).tolist()


def read_config(folder: Path, model_type: str, name: str) -> dict:
    """config.json of a `model_type` model (`name`, as messages say it); CheckpointError otherwise."""
    try:
        data = json.loads((folder / "config.json").read_text())
    except FileNotFoundError as exc:
        raise CheckpointError("config.json is missing from the checkpoint folder") from exc
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"config.json cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("model_type") != model_type:
        kind = data.get("model_type") if isinstance(data, dict) else None
        raise CheckpointError(f"config.json describes a {kind!r} model, not a {name} model (model_type '{model_type}')")
    return data


def whole_numbers(data: dict, names: list[str], epsilon: str) -> dict:
    """The sizes config.json gives among `names`, each a whole number of at least 1, and the LayerNorm `epsilon`
    a number between 0 and 1; CheckpointError names the first that is not."""
    found = {name: data[name] for name in names if name in data}
    for name, value in found.items():
        if name == epsilon:
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise CheckpointError(f"config.json: {name} {value!r} is not a number between 0 and 1")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(f"config.json: {name} {value!r} is not a whole number of at least 1")
    return found


def check_size(parameters: int, shape: str) -> None:
    """CheckpointError before building a model of `parameters` (`shape` says its depth and width) larger than this
    process may hold (its address-space cap, the server's RECIPE_MEMORY_MB, where one is set), rather than
    failing or swapping midway."""
    cap = resource.getrlimit(resource.RLIMIT_AS)[0]
    if cap == resource.RLIM_INFINITY:
        return
    needed = 4 * parameters  # float32
    with open("/proc/self/statm") as statm:  # the address space in use, in pages
        used = int(statm.read().split()[0]) * resource.getpagesize()
    if used + needed > cap:
        raise CheckpointError(
            f"config.json describes {parameters:,} parameters ({needed / 2**20:,.0f} MiB in float32: {shape}); this "
            f"recipe process may add {max(cap - used, 0) / 2**20:,.0f} MiB (RECIPE_MEMORY_MB)"
        )


def read_weights(folder: Path) -> tuple[str, dict[str, Tensor]]:
    """The checkpoint's tensors by name, and the file they came from."""
    path = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if path is None:
        raise CheckpointError(f"the checkpoint folder has neither {' nor '.join(WEIGHT_FILES)}")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return path.name, load_file(path)
        return path.name, torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: each format raises its own error types
        raise CheckpointError(
            f"{path.name} cannot be read as {path.suffix[1:]} weights: {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc


def assign(
    build: Callable[[], nn.Module],
    tensors: dict[str, Tensor],
    rename: Callable[[str], str | None],
    source: str,
    where: str,
    what: str,
) -> nn.Module:
    """The model `build()` makes, its parameters the checkpoint's tensors, in eval mode. `rename(name)` gives a
    tensor's parameter name (None: not computed here) and may return it reshaped as `(name, tensor)`; `where` and
    `what` name the model in messages ("a 12-layer model", "a BERT encoder"). CheckpointError names a missing,
    misshapen or extra tensor, and the file (`source`)."""
    with torch.device("meta"):  # no memory and no random initialisation for weights about to be replaced
        model = build()
    expected = {name: p.shape for name, p in model.named_parameters()}
    state = {}
    for name, tensor in tensors.items():
        renamed = rename(name)
        if renamed is None:
            continue
        target, tensor = renamed if isinstance(renamed, tuple) else (renamed, tensor)
        if target not in expected:
            raise CheckpointError(f"{source}: {name} has no place in {where}")
        if tensor.shape != expected[target]:
            raise CheckpointError(
                f"{source}: {name} has shape {list(tensor.shape)}, config.json implies {list(expected[target])}"
            )
        state[target] = tensor.float().contiguous()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise CheckpointError(
            f"{source} lacks {len(missing)} tensor{'s' * (len(missing) > 1)} of {what}, such as "
            f"the one for {missing[0]}"
        )
    model.load_state_dict(state, assign=True)
    return model.eval()


@dataclass(frozen=True)
class Loaded:
    """A checkpoint's model, its tokenizer, the weights file it was read from, and what its lab found reading its own
    probe inputs with those weights (probe(); None where it was not probed)."""

    model: Any
    vocabulary: Any
    weights: str
    probe: dict | None = None


def load(
    checkpoint: str,
    model: Callable[[Path], Any],
    vocabulary: Callable[[Path, Any], Any],
    probing: Callable[[Loaded], dict] | None = None,
) -> Loaded:
    """The checkpoint's model (`model(folder)`) and tokenizer (`vocabulary(folder, model)`), loaded once per
    process and again only when its files change, and probed as it is loaded (`probing(loaded)`): a few forward
    passes once, not per request, and at the lab's warm-up, before any run (What if? counts every module call of a
    run, and the probe's are none of them)."""

    def build(folder: Path) -> Loaded:
        built = model(folder)
        loaded = Loaded(built, vocabulary(folder, built), weights_file(folder))
        return loaded if probing is None else replace(loaded, probe=probing(loaded))

    return kept(checkpoint, build)


@dataclass(frozen=True)
class Kept:
    """A loaded checkpoint, with the stamp of the files it was loaded from."""

    stamp: tuple  # the files' names, sizes and modification times: a changed checkpoint is loaded again
    loaded: Any


_kept: dict[str, Kept] = {}  # one checkpoint kept per recipe process: the first request pays the load


def _stamp(folder: Path) -> tuple:
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file())


def kept(checkpoint: str, load: Callable[[Path], Any]) -> Any:
    """`load(folder)`'s result for the checkpoint folder, loaded once per process and again only when its files
    change; never two checkpoints in memory at once."""
    folder = Path(checkpoint)
    if not folder.is_dir():
        raise CheckpointError("the checkpoint folder does not exist")
    stamp = _stamp(folder)
    found = _kept.get(checkpoint)
    if found is None or found.stamp != stamp:
        _kept.clear()
        _kept[checkpoint] = found = Kept(stamp, load(folder))
    return found.loaded


def weights_file(folder: Path) -> str:
    """The name of the weights file the checkpoint is read from."""
    return next(name for name in WEIGHT_FILES if (folder / name).is_file())


# Weights that look untrained, on a lab's own probe inputs: a next-word distribution this near uniform (its entropy
# over that of the uniform one: a random GPT-2 or BERT gave 0.97 to 0.997, the project's sorter 0.0), or sentence
# embeddings this alike across unrelated sentences (cosine: a random encoder 0.92 to 0.97, all-MiniLM-L6-v2 0.44 to
# 0.53).
UNTRAINED_SPREAD = 0.9
UNTRAINED_ALIKE = 0.85


def spread(probabilities: Tensor) -> float:
    """How near uniform a distribution is: its entropy over the uniform distribution's, from 0 (certain) to 1."""
    p = probabilities.double()
    return float(-(p * p.clamp_min(1e-300).log()).sum() / torch.log(torch.tensor(float(p.numel()))))


def probe(measured: float, untrained: bool, rule: str) -> dict:
    """What a lab says of its checkpoint's weights after reading its own probe inputs with them."""
    note = (
        f"These weights look untrained ({rule}: {measured:.3g}): the predictions may mean nothing."
        if untrained
        else f"These weights read the probe inputs as trained weights do ({rule}: {measured:.3g})."
    )
    return {"looks_untrained": untrained, "measured": measured, "rule": rule, "note": note}
