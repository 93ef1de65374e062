"""Interventions, inside a recipe process: a lab entry run as asked, then again with modules' outputs (or
one attention head's context) zeroed, averaged, scaled or patched, and how much every module changed.

The recipe is not told: every module call passes through `hooked` (a wrapper of torch's module call), which
names it by the recorded graph's rule (`blocks.0.act`, its second call `blocks.0.act#2`, counted per forward
of the model) and changes the outputs the request names. The domain tier has checked the request against the
graph; what only a run can tell (a node this input never reaches, a patch source of another shape, a head past
the module's count) is refused here (recipekit's Refused, which the reader is told) with the field at fault.
"""

import functools
import itertools
import json
import math
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from recipekit.refusals import Refused

from ..domain.lru import SizedLRU
from ..domain.steps import Step
from .errors import out_of_memory
from .process import manual_seed

EPSILON = 1e-12  # below this norm an output counts as zero when its change is measured
# Values a change is measured over at a time (outputs held, then subtracted and normed together, then let go): a
# sampler's outputs held to the end (tens of MB) cost more in fresh pages than the arithmetic done in them, and a
# chunk too small pays a call into torch for a few outputs; the DDPM's change costs least about here.
CHUNK = 1 << 17
# The most a plain run's outputs are held at once (its Baseline). A run that makes more (the DDPM's held-out split:
# 2.1 GB over 3,838 calls; the Transformer's, decoded step by step: 424 MB) is measured a window at a time, each
# window's outputs made again from the seed and the changed run made again beside them, so that a change to any
# recorded case answers within a recipe process's memory bound (RECIPE_MEMORY_MB), in a few more runs.
WINDOW_BYTES = 192 * 2**20
# A run that calls its model more than once (a sampler's steps, a generation's tokens) meets each node again in
# every call: the k-th time is kept as `<node>|<k>` (k ≥ 1) beside the first, and measured with it.
AGAIN = "|"


def occurrence(node: str, index: int) -> str:
    """The key of a node's `index`-th output in a run (0: its first)."""
    return node if index == 0 else f"{node}{AGAIN}{index}"


def node_of(key: str) -> str:
    return key.split(AGAIN, 1)[0]


class PastWindow(BaseException):
    """A run made again for one window of its outputs (WINDOW_BYTES) stopped once past it: what follows is another
    window's. Not an Exception: a recipe that catches every error still cannot finish the run."""


# Every module's name in its outermost model, kept while the module lives (a recipe's cached checkpoint
# model is named once per process; a model built per request is named from itself, cheaply).
NAMES: "weakref.WeakKeyDictionary[nn.Module, str]" = weakref.WeakKeyDictionary()
# The model each module was registered in (torch's public module registration hook): a part a recipe calls alone
# is named in its outermost model, found by walking up.
PARENTS: "weakref.WeakKeyDictionary[nn.Module, weakref.ref]" = weakref.WeakKeyDictionary()
_PARENTS_KNOWN: list = []  # the registration hook, once per process (follow_parents)


def registered(parent: nn.Module, name: str, child: nn.Module | None) -> None:
    if child is not None and child not in PARENTS:
        PARENTS[child] = weakref.ref(parent)


def follow_parents() -> None:
    """From now on, every module this process builds is known by the model it is built into, so that a part a recipe
    calls alone (a trace runs the embeddings, then each layer) is named in its model. A recipe process asks this
    at its start, before any recipe builds a model; a run asks it too."""
    if not _PARENTS_KNOWN:
        _PARENTS_KNOWN.append(nn.modules.module.register_module_module_registration_hook(registered))


def outermost(module: nn.Module) -> nn.Module | None:
    """The outermost model holding `module`, where it was built after follow_parents, else None."""
    found = module
    while (parent := PARENTS.get(found)) is not None and (parent := parent()) is not None:
        found = parent
    return None if found is module else found


class Tracker:
    """Names every module call of a run by the graph's rule.

    A module of the recorded model's class (`root`) names its parts itself. A recipe may also call a model's
    parts one by one (a trace runs the embeddings, then each layer); a part not named yet is named in the
    outermost model holding it, or in the recorded model whose call is under way. Another model a run calls (a
    baseline beside the recorded one) is no part of the graph: its modules have no node, so that a change to
    `embed` changes the recorded model's alone."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.calls: dict[str, int] = {}
        # This run's answers by id (a weak map's lookup costs a weak reference per call); each module is held
        # so that its id stays its own until the run ends.
        self.known: dict[int, tuple[nn.Module, str | None]] = {}
        self.under_way: list[tuple[nn.Module, str | None]] = []  # the module calls under way and their nodes

    @staticmethod
    def name_from(model: nn.Module) -> None:
        for name, module in model.named_modules():
            NAMES[module] = name

    def name(self, module: nn.Module) -> str | None:
        """The module's name in the graph: "" for the recorded model itself, None for no part of it."""
        if module not in NAMES:
            model = module if type(module).__name__ == self.root else outermost(module)
            if model is None or type(model).__name__ != self.root:
                model = next((m for m, _ in self.under_way if type(m).__name__ == self.root), None)
            if model is not None:
                self.name_from(model)
        return NAMES.get(module)

    def node(self, module: nn.Module) -> str | None:
        """The graph node of this call of the module, counted per forward of its model."""
        found = self.known.get(id(module))
        if found is None:
            found = self.known[id(module)] = (module, self.name(module))
        name = found[1]
        if not name:
            if name is not None:  # a forward of the whole model: its modules' calls are counted afresh
                self.calls = {}
            return None
        count = self.calls[name] = self.calls.get(name, 0) + 1
        return name if count == 1 else f"{name}#{count}"


class Recording:
    """Tensors a run made, held as they are rather than copied (a copy of every call's output is a cost on a model
    of many small modules), each with its version: `intact()` tells whether the
    recipe wrote into one of them in place later in the run, and then the run is made again with copies."""

    def __init__(self, copy: bool, first: int = 0, most: int | None = None, stop: bool = False) -> None:
        self.copy = copy
        self.tensors: dict[str, Tensor] = {}
        self.versions: list[tuple[Tensor, int]] = []
        self.bytes = 0
        self.seen: dict[str, int] = {}  # how many times each key was kept: its next occurrence
        # A window of the run: its outputs from the `first`-th on (counted as they come), while they hold at most
        # `most` bytes; `rest` is the first one past it, None when the window reached the run's end.
        self.first, self.most = first, most
        self.stop = stop  # PastWindow once past it: the run's result is not wanted
        self.count = 0
        self.rest: int | None = None

    def take(self, key: str, tensor: Tensor) -> None:
        count = self.seen.get(key, 0)
        self.seen[key] = count + 1
        if count:
            key = occurrence(key, count)
        index = self.count
        self.count += 1
        if index < self.first or self.rest is not None:
            return
        if self.most is not None and self.tensors and self.bytes + tensor.nbytes > self.most:
            self.rest = index
            if self.stop:
                raise PastWindow
            return
        if tensor.requires_grad:  # a recipe that differentiates: its graph is not kept alive with the value
            tensor = tensor.detach()
        if self.copy or tensor.is_inference():  # an inference tensor keeps no version to watch
            tensor = tensor.clone()
        else:
            self.versions.append((tensor, tensor._version))
        self.tensors[key] = tensor
        self.bytes += tensor.nbytes

    def intact(self) -> bool:
        return all(tensor._version == version for tensor, version in self.versions)


def until_intact(run: Callable[[Recording], Any], seed: int, first: int = 0,
                 most: int | None = None) -> tuple[Any, Recording]:
    """`run` from the seed keeping tensors as they are (those of the window `first`, `most`: Recording, which stops a
    run past a window that is not its first); again from the seed, copying them, if one was written into in place.
    Each run starts from the seed, as a plain run does: sampling draws the same."""
    for copy in (False, True):
        manual_seed(torch, seed)
        recording = Recording(copy, first, most, stop=first > 0)
        result = run(recording)
        if recording.intact():  # copies are never watched: a run that copies is always intact
            break
    return result, recording


def first_tensor(value: Any) -> Tensor | None:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, tuple | list) and value and isinstance(value[0], Tensor):
        return value[0]
    return None


def replace_first(value: Any, tensor: Tensor) -> Any:
    if isinstance(value, Tensor):
        return tensor
    return type(value)([tensor, *value[1:]])


def positions(tensor: Tensor, where: str) -> tuple[int, ...]:
    """The dimensions `mean` averages over: a sequence's positions (B, T, C), an image's (B, C, H, W)."""
    if tensor.dim() == 3:
        return (1,)
    if tensor.dim() == 4:
        return (2, 3)
    raise Refused(f"{where}.action: mean needs positions, and this output's shape is {list(tensor.shape)}")


def changed(tensor: Tensor, item: Step, where: str, source: Tensor | None, module: nn.Module) -> Tensor:
    """The tensor with the intervention applied; `item.head` picks one head's slice of the last axis."""
    if item.head is not None:
        count = item.heads if isinstance(item.heads, int) else getattr(module, str(item.heads), None)
        if not isinstance(count, int) or not 0 <= item.head < count:
            raise Refused(f"{where}.head: {item.head} is not a head of {item.node} ({count} heads)")
        split = tensor.unflatten(-1, (count, -1))  # (..., heads, head_dim)
        head = split[..., item.head, :]
        source_head = None if source is None else source.unflatten(-1, (count, -1))[..., item.head, :]
        new = split.clone()
        new[..., item.head, :] = changed(head, replace(item, head=None), where, source_head, module)
        return new.flatten(-2)
    # Every replacement stays a function of the tensor, so that a recipe that differentiates through the
    # model (a saliency map) still can: a zeroed part passes no gradient, and a patch passes it on as the
    # unpatched output would (its value is the source's exactly), so that patching a run with itself is a no-op.
    action = item.action
    if action == "zero":
        return tensor * 0.0
    if action == "scale":
        return tensor * item.factor
    if action == "mean":
        dims = positions(tensor, where)
        return tensor.mean(dim=dims, keepdim=True).expand_as(tensor).clone()
    if source is None:
        raise Refused(f"{where}.from_case: the source run never reached {item.node}")
    if source.shape != tensor.shape:
        raise Refused(f"{where}.from_case: its {item.node} has shape {list(source.shape)}, this input's "
                      f"{list(tensor.shape)}")
    return source + (tensor - tensor.detach())


@contextmanager
def hooked(on_input: Callable | None, on_output: Callable, root: str):
    """Every module call of a run passes through here for its duration, through torch's public global module hooks:
    its input (where `on_input` is given) and its output, each of which the callback may replace. Global hooks run
    before a module's own, so that a recipe's own hooks (a capture of attention maps) see the changed output."""
    follow_parents()
    tracker = Tracker(root)

    def before(module: nn.Module, args: tuple) -> tuple | None:
        node = tracker.node(module)
        tracker.under_way.append((module, node))
        if node and on_input is not None and (replaced := on_input(module, node, args)) is not None:
            return replaced if isinstance(replaced, tuple) else (replaced,)
        return None

    def after(module: nn.Module, args: tuple, output: Any) -> Any:
        _, node = tracker.under_way.pop()
        return on_output(module, node, output) if node and output is not None else None

    entering = nn.modules.module.register_module_forward_pre_hook(before)
    # always_call: a module whose forward raises still leaves the calls under way as they were
    leaving = nn.modules.module.register_module_forward_hook(after, always_call=True)
    try:
        yield
    finally:
        entering.remove()
        leaving.remove()


def run_recording(function: Callable, args: dict, seed: int, root: str, wanted: Callable[[str], bool],
                  inputs: set[str], first: int = 0, most: int | None = None) -> tuple:
    """The entry's result from the seed, the outputs of every node `wanted` names (the inputs of those in
    `inputs`) in the window `first`, `most` (Recording), and the first output past that window (None: none is)."""
    def run(seen: Recording) -> Any:
        def on_input(module, node, call_args):
            if node in inputs and call_args and isinstance(call_args[0], Tensor):
                seen.take(f"{node}:input", call_args[0])

        def on_output(module, node, output):
            tensor = first_tensor(output)
            if tensor is not None and wanted(node):
                seen.take(node, tensor)

        with hooked(on_input if inputs else None, on_output, root):
            try:
                return function(**args)
            except PastWindow:
                return None

    result, seen = until_intact(run, seed, first, most)
    return result, seen.tensors, seen.rest


def end_to_end(tensors: list[Tensor]) -> Tensor:
    """The tensors' values laid end to end in a new flat tensor (never a view of one of them: a Baseline's copy
    outlives the run that made them)."""
    if len(tensors) < 2:  # torch.cat of one tensor is a copy too, but of its shape
        return tensors[0].reshape(-1).clone() if tensors else torch.zeros(0)
    return torch.cat([tensor.reshape(-1) for tensor in tensors])


def squares_by_part(values: Tensor, lengths: Tensor, block: int) -> Tensor:
    """The sum of squares of each part of a flat tensor (parts `lengths` long, one after another, each a whole
    number of `block`s), squared in place (it is the caller's scratch), in its own precision: summed a block at a
    time, then by part (torch's sum by part goes a value at a time, slow on a sampler's millions of values).
    A part's sum depends on its values alone, not on where the tensor begins, so that a baseline summed whole
    and a changed run summed a chunk at a time sum a node's unchanged output alike (a zeroed node reads exactly
    1)."""
    squares = values.square_()
    if block > 1:
        squares = squares.view(-1, block).sum(1)
    return torch.segment_reduce(squares, "sum", lengths=lengths)


SQUARED_AT_ONCE = 1 << 22  # values: the scratch a baseline's norms take (16 MB of float32), not a copy of it all


def summed_squares(values: Tensor, sizes: list[int], lengths: Tensor, block: int) -> list[float]:
    """Each part's squared norm (parts `sizes` long, laid end to end in `values`), summed whole parts at a time in
    a scratch of about SQUARED_AT_ONCE values (a part's sum depends on its values alone: squares_by_part), each
    group in float64 where its precision's range is passed."""
    squares: list[float] = []
    first = start = 0
    while first < len(sizes):
        last, end = first + 1, start + sizes[first]
        while last < len(sizes) and end + sizes[last] - start <= SQUARED_AT_ONCE:
            end += sizes[last]
            last += 1
        chunk, counted = values[start:end], lengths[first:last]
        summed = squares_by_part(chunk.clone(), counted, block)
        if not bool(torch.isfinite(summed).all()):
            summed = squares_by_part(chunk.double(), counted, block)
        squares += summed.double().tolist()
        first, start = last, end
    return squares


def block_of(sizes: list[int]) -> int:
    """The largest block of at most 32 values that every size is a whole number of."""
    whole = math.gcd(*sizes) if sizes else 1
    return next(block for block in (32, 16, 8, 4, 2, 1) if whole % block == 0)


@dataclass(frozen=True)
class Baseline:
    """A run's node outputs copied end to end in their own precision (`parts`: each output, shaped, views of the
    copy) and each output's squared norm: what the changes of every later run on the same input are measured
    against, laid out once. A copy, not the run's own tensors: a run kept in a recipe process's kept runs outlives
    anything the recipe may later write into."""

    keys: list[str]  # each output's key: `node`, then `node|1`, ... for its later calls
    values: Tensor
    shapes: list[torch.Size]  # each output's (read on every module call of a changed run)
    squares: list[float]  # each output's squared norm
    places: dict[str, list[int]]  # each node's outputs' places in `keys`, by call (-1: that call's is not kept)
    offsets: list[int]  # where each output begins in `values`, and where the last ends
    lengths: Tensor  # each output's number of blocks
    block: int  # values a block: every output is a whole number of them
    owners: list[str]  # each output's node
    rest: int | None = None  # a window of a run (WINDOW_BYTES): the first of its outputs past it; None: the whole run

    @classmethod
    def from_outputs(cls, outputs: dict[str, Tensor], keys: list[str] | None = None, consume: bool = False,
           rest: int | None = None) -> "Baseline":
        """The baseline of a run's outputs; `consume`: the outputs are the caller's to give up, and each leaves
        `outputs` as it is copied, so that a run of many calls (a held-out split decoded step by step: 445 MB) is
        held once while it is laid out, not twice."""
        if keys is None:
            keys = [key for key, tensor in outputs.items() if tensor.is_floating_point()]
        shapes = [outputs[key].shape for key in keys]
        if not consume:
            return cls.from_flat(keys, end_to_end([outputs[key] for key in keys]), shapes)
        dtype = functools.reduce(torch.promote_types, [outputs[key].dtype for key in keys]) if keys else torch.float32
        values = torch.empty(sum(math.prod(shape) for shape in shapes), dtype=dtype)
        start, group = 0, []
        for index, key in enumerate(keys):
            group.append(outputs.pop(key).reshape(-1))
            # Copied a chunk at a time, one call into torch each (a sampler's thousands of outputs copied one by one
            # cost a good part of its plain run), each chunk let go once copied.
            if index + 1 == len(keys) or len(group) >= 256:
                end = start + sum(t.numel() for t in group)
                torch.cat(group, out=values[start:end])
                start, group = end, []
        return replace(cls.from_flat(keys, values, shapes), rest=rest)

    @classmethod
    def from_flat(cls, keys: list[str], values: Tensor, shapes: list[torch.Size],
             squares: list[float] | None = None) -> "Baseline":
        """The baseline of outputs already laid end to end in `values` (each of its shape in `shapes`), whose
        squared norms are `squares` (summed here where not given): what `of` makes, and what a run kept in another
        process is read back as."""
        sizes = [math.prod(shape) for shape in shapes]
        if len(keys) != len(shapes) or squares is not None and len(squares) != len(keys) \
                or sum(sizes) != values.numel():
            raise ValueError("a baseline's keys, shapes, squares and values disagree")
        block = block_of(sizes)
        lengths = torch.tensor(sizes, dtype=torch.long) // block
        if squares is None:
            squares = summed_squares(values, sizes, lengths, block)
        places: dict[str, list[int]] = {}
        owners = []
        for at, key in enumerate(keys):
            node, _, call = key.partition(AGAIN)  # occurrence()'s key
            found = places.setdefault(node, [])
            found.extend([-1] * (int(call or 0) + 1 - len(found)))
            found[int(call or 0)] = at
            owners.append(node)
        return cls(keys, values, [torch.Size(shape) for shape in shapes], squares, places,
                   [0, *itertools.accumulate(sizes)], lengths, block, owners)

    @functools.cached_property
    def parts(self) -> list[Tensor]:
        """Each output, shaped: views of the values, made when first asked for (a patch's source, a run measured
        again): a view costs a call into torch, and a run of 139 module calls is kept without them."""
        sizes = [end - start for start, end in itertools.pairwise(self.offsets)]
        return [part.view(shape) for part, shape in zip(self.values.split(sizes), self.shapes, strict=True)]

    def bytes(self) -> int:
        return self.values.numel() * self.values.element_size()

    def outputs(self, nodes: set[str]) -> dict[str, Tensor] | None:
        """These nodes' outputs as the run made them (views of the values), every occurrence of each, or None where
        one is not kept."""
        if not nodes <= self.places.keys():
            return None
        return {key: part for key, part in zip(self.keys, self.parts, strict=True) if node_of(key) in nodes}

    def totals(self, measured: list[int], moved: list[float], totals: dict[str, list[float]]) -> None:
        """Add to each node's [||after - before||², ||before||²] in `totals` those of the outputs `measured` (places
        in `keys`), `moved` their squared changes: a node met in several calls of the model (a sampler's steps), or
        in several windows of its run, is measured over all of its outputs together (relative)."""
        owners, squares = self.owners, self.squares
        for at, change in zip(measured, moved, strict=True):
            total = totals.get(owners[at])
            if total is None:
                total = totals[owners[at]] = [0.0, 0.0]
            total[0] += change
            total[1] += squares[at]


def relative(totals: dict[str, list[float]]) -> dict[str, float]:
    """Each node's ||after - before|| / ||before|| from its totals (Baseline.totals), 0 where it did not move."""
    return {node: (m / s) ** 0.5 if s ** 0.5 > EPSILON else m ** 0.5 for node, (m, s) in totals.items()}


def change(tensors: list[Tensor], values: Tensor) -> Tensor:
    """The tensors laid end to end less `values` (as long), in a new tensor: the tensors' own precision where they
    share the values', else the wider of the two."""
    if len(tensors) > 1 and all(t.dtype == values.dtype for t in tensors):
        return end_to_end(tensors).sub_(values)
    flat = tensors[0].reshape(-1) if len(tensors) == 1 else torch.cat([t.reshape(-1) for t in tensors])
    return flat - values


def effects(before: Baseline | dict[str, Tensor], after: dict[str, Tensor]) -> dict[str, float]:
    """How much each node's output moved from `before` to the outputs `after` holds, measured on the outputs both
    runs share alike (a run that skipped a node or gave it another shape, a decoder that stopped elsewhere), as
    a changed run is measured as it goes (Moved)."""
    base = before if isinstance(before, Baseline) else Baseline.from_outputs(before)
    moved = Moved(base)
    for at, (key, part) in enumerate(zip(base.keys, base.parts, strict=True)):
        if (tensor := after.get(key)) is not None and tensor.shape == part.shape:
            moved.hold(at, tensor)
    return moved.effects()


class Moved:
    """How far each output of a run moved from the baseline's, measured as the run goes: each subtracted in the
    outputs' own precision (exactly 0 where it did not move) and summed as the baseline was (so that a zeroed
    node reads exactly 1), in float64 where that overflows. Outputs are held until a chunk's worth has come,
    then laid end to end, subtracted from the baseline's stretch of values and summed by output (a few calls
    into torch a chunk), and let go, so that the next chunk's memory is theirs: a sampler's 3,900 outputs held
    to the end cost more in fresh pages than measuring them, and one torch call per output as much again. An
    output the recipe wrote into in place before its chunk was measured spoils the measurement (`intact` false:
    the run is made again, keeping copies)."""

    def __init__(self, base: Baseline, copy: bool = False, stop: bool = False) -> None:
        self.base = base
        # PastWindow once every node has been met as often as the baseline's window holds it (`owed` nodes have
        # not): the rest of the run is another window's.
        self.owed = len(base.places) if stop else -1
        self.copy = copy  # each output copied as it comes: a run that writes into its outputs in place
        self.places, self.shapes = base.places, base.shapes  # read on every module call
        self.seen: dict[str, int] = {}  # how many times each node was met: its next call
        self.measured: list[int] = []  # places in base.keys, in the order of `squares`
        self.squares: list[Tensor] = []
        self.held: list[Tensor] = []
        self.at: list[int] = []  # the held outputs' places
        self.versions: list[int] = []
        self.held_values = 0  # how many values `held` holds: measured once they reach CHUNK
        self.intact = True

    def take(self, node: str, tensor: Tensor) -> None:
        """The node's next output in this run, measured against the baseline's output of the same call."""
        places = self.places.get(node)
        if places is None:
            return
        call = self.seen.get(node, 0)
        self.seen[node] = call + 1
        if call < len(places) and (at := places[call]) >= 0 and self.shapes[at] == tensor.shape:
            self.hold(at, tensor)
        if call + 1 == len(places) and self.owed > 0:
            self.owed -= 1
            if not self.owed:
                raise PastWindow

    def hold(self, at: int, tensor: Tensor) -> None:
        """An output measured against the baseline's `at`-th (of the same shape)."""
        if tensor.requires_grad:  # its graph is not kept alive with the value (a detached view shares its version)
            tensor = tensor.detach()
        if self.copy:
            tensor = tensor.clone()
        if tensor.is_inference():  # no version to watch: measured at once, after what is held (in order)
            self.measure()
            self.stretch([tensor], at)
            return
        self.held.append(tensor)
        self.at.append(at)
        self.versions.append(tensor._version)
        self.held_values += tensor.numel()
        if self.held_values >= CHUNK:
            self.measure()

    def measure(self) -> None:
        if not self.held:
            return
        held, at = self.held, self.at
        self.intact = self.intact and [tensor._version for tensor in held] == self.versions
        # Each stretch of outputs that lie one after another in the baseline (as a run met them; a run that skipped
        # some leaves a few gaps) is measured against one stretch of its values.
        first = 0
        for last in range(1, len(at) + 1):
            if last == len(at) or at[last] != at[last - 1] + 1:
                self.stretch(held[first:last], at[first])
                first = last
        self.held, self.at, self.versions, self.held_values = [], [], [], 0

    def stretch(self, tensors: list[Tensor], first: int) -> None:
        """Outputs measured against the baseline's, from its `first`-th on."""
        base = self.base
        lengths = base.lengths[first:first + len(tensors)]
        values = base.values[base.offsets[first]:base.offsets[first + len(tensors)]]
        squares = squares_by_part(change(tensors, values), lengths, base.block)
        if squares.dtype != torch.float64 and not bool(torch.isfinite(squares).all()):
            squares = squares_by_part(change([t.double() for t in tensors], values.double()), lengths, base.block)
        self.squares.append(squares)
        self.measured += range(first, first + len(tensors))

    def effects(self) -> dict[str, float]:
        """Each node's relative change (see `intact` before trusting it)."""
        totals: dict[str, list[float]] = {}
        self.add_to(totals)
        return relative(totals)

    def add_to(self, totals: dict[str, list[float]]) -> None:
        """Add what this run moved to each node's totals (Baseline.totals)."""
        self.measure()
        if self.squares:
            self.base.totals(self.measured, torch.cat(self.squares).double().tolist(), totals)


def plain_run(function: Callable, args: dict, seed: int, root: str, plain_runs: SizedLRU | None,
              key: str | None) -> tuple[Any, Baseline, bool]:
    """The entry's result on `args` as asked, every node's output laid out as a Baseline, and whether both
    were found in `plain_runs`, where they are kept under `key` (which names the recipe's content, the checkpoint,
    torch and the seed): a reader who stacks changes on one input (or asks the options, then a change) runs it
    unchanged once."""
    found = plain_runs.get(key) if plain_runs is not None and key else None
    if found is not None:
        return *found, True
    plain, base = window_run(function, args, seed, root, 0)
    if plain_runs is not None and key and base.rest is None:
        plain_runs.put(key, (plain, base), base.bytes() + len(json.dumps(plain, default=str)))
    return plain, base, False


def window_run(function: Callable, args: dict, seed: int, root: str, first: int) -> tuple[Any, Baseline]:
    """The entry's result, and the Baseline of its outputs from the `first`-th on, as many as WINDOW_BYTES hold
    (`rest` names the first past them)."""
    plain, before, rest = run_recording(function, args, seed, root, lambda node: True, set(), first, WINDOW_BYTES)
    return plain, Baseline.from_outputs(before, consume=True, rest=rest)


def call_shapes(function: Callable, args: dict, seed: int, root: str) -> dict[str, list[list[int] | None]]:
    """Each node's output shapes, call by call (None for one that is not of floating point), and nothing kept: the
    outline of a run too large for one window."""
    shapes: dict[str, list[list[int] | None]] = {}

    def on_output(module, node, output):
        tensor = first_tensor(output)
        if tensor is not None:
            shapes.setdefault(node, []).append(list(tensor.shape) if tensor.is_floating_point() else None)

    manual_seed(torch, seed)
    with hooked(None, on_output, root):
        function(**args)
    return shapes


def outlines(function: Callable, requests: list[dict], seed: int, root: str, plain_runs: SizedLRU | None = None,
             keys: list[str | None] | None = None) -> list[dict[str, list] | None]:
    """The outputs that an intervention can change (those of floating point) in the entry's run on each request,
    node by node: the shape of each of the node's calls in turn, as [shape, calls in a row] pairs (a sampler's 100
    steps of one shape are one pair). The first request is the run to be changed, the others the runs a patch may
    take outputs from: where one of those fails, its outline is None. Each run is kept in `plain_runs` under its key
    (plain_run), so that a change asked next finds it."""
    found: list[dict[str, list] | None] = []
    for index, args in enumerate(requests):
        try:
            _, base, _ = plain_run(function, args, seed, root, plain_runs, keys[index] if keys else None)
            calls = {node: [list(base.shapes[at]) if at >= 0 else None for at in places]
                     for node, places in base.places.items()} if base.rest is None \
                else call_shapes(function, args, seed, root)
        except Exception:
            if not index:
                raise
            found.append(None)
            continue
        nodes: dict[str, list] = {}
        for node, each in calls.items():
            shapes = nodes[node] = []
            for shape in each:
                if shapes and shapes[-1][0] == shape:
                    shapes[-1][1] += 1
                else:
                    shapes.append([shape, 1])
        found.append(nodes)
    return found


def in_words(interventions: list[Step]) -> str:
    """The interventions in words: "scaling decoder by 3", "zeroing head 2 of h.0.attn and patching h.1"."""
    verbs = {"zero": "zeroing", "mean": "averaging", "scale": "scaling", "patch": "patching"}
    parts = []
    for item in interventions:
        node = f"head {item.head} of {item.node}" if item.head is not None else item.node
        part = f"{verbs.get(item.action, item.action)} {node}"
        if item.action == "scale":
            part += f" by {item.factor:g}"
        elif item.action == "patch":
            part += f" from {item.from_case or 'another case'}"
        parts.append(part)
    return " and ".join(parts)


def intervene(function: Callable, args: dict, steps: list[Step], sources: list[dict], seed: int,
              root: str, plain_runs: SizedLRU | None = None, key: str | None = None,
              source_keys: list[str | None] | None = None) -> dict:
    """The entry run on `args`, then with the interventions; `sources[i]` is the request whose run a patch
    step with `source` i takes its tensor from.
    `root` is the class name of the recorded model, whose modules the graph names; the run as asked is
    taken from `plain_runs` where `key` finds it (plain_run), and a source's outputs where `source_keys[i]` finds
    its run kept there (a recorded case, kept at warm-up), without running it."""
    patched: dict[int, dict[str, Tensor]] = {}
    for index, source in enumerate(sources):
        targets = {i.target for i in steps if i.source == index}
        inputs = {i.target for i in steps if i.source == index and i.on == "input"}
        key_of_source = source_keys[index] if source_keys else None
        stored = plain_runs.get(key_of_source) if plain_runs is not None and key_of_source else None
        found = stored[1].outputs(targets) if stored is not None and not inputs else None  # a head needs its input
        patched[index] = found if found is not None else \
            run_recording(function, source, seed, root, lambda node, t=targets: node in t, inputs)[1]
    plain, before, cached = plain_run(function, args, seed, root, plain_runs, key)
    targets = {(item.target, item.on) for item in steps}
    counted = {item.node for item in steps if item.on == "input"}  # modules whose heads a change counts
    changed_outputs = {target for target, on in targets if on == "output"}

    def run(after: Recording | Moved) -> tuple[Any, list[int]]:
        applied = [0] * len(steps)
        called: dict[str, nn.Module] = {}  # node -> the module making that call
        met: dict[tuple[str, str], int] = {}  # how many times each target was met: in which call of the model

        def apply(module, node, value, on: str):
            tensor = first_tensor(value)
            if tensor is None:
                return None
            count = met[node, on] = met.get((node, on), 0) + 1
            key = occurrence(node if on == "output" else f"{node}:input", count - 1)
            for index, item in enumerate(steps):
                if item.target != node or item.on != on:
                    continue
                where = f"interventions[{index}]"
                source = patched.get(item.source, {}).get(key)
                # A head's count may be an attribute of the attention module, whose call is under way.
                tensor = changed(tensor, item, where, source, module if on == "output" else called[item.node])
                applied[index] += 1
            if on == "output":
                after.take(node, tensor)
            return replace_first(value, tensor)

        def on_input(module, node, call_args):
            if node in counted:
                called[node] = module
            return apply(module, node, call_args, "input") if (node, "input") in targets else None

        def on_output(module, node, output):
            if node in changed_outputs:
                return apply(module, node, output, "output")
            if (tensor := first_tensor(output)) is not None:
                after.take(node, tensor)
            return None

        with hooked(on_input if counted or any(on == "input" for _, on in targets) else None, on_output, root):
            try:
                return function(**args), applied
            except PastWindow:
                return None, applied

    def measured_against(base: Baseline, totals: dict[str, list[float]], whole: bool) -> tuple[Any, list[int]]:
        """The changed run measured against one window's outputs; `whole`: run to its end (the first window's run
        is the answer), else stopped past the window."""
        for copy in (False, True):  # measured again on copies where the recipe wrote into an output in place
            manual_seed(torch, seed)
            moved = Moved(base, copy, stop=not whole)
            ran = run(moved)
            moved.measure()  # what is still held: an output written into since shows here
            if moved.intact:
                break
        moved.add_to(totals)
        return ran

    totals: dict[str, list[float]] = {}
    try:
        result, applied = measured_against(before, totals, whole=True)
        rest = before.rest
        while rest is not None:  # the rest of a run too large for one window, one window held at a time
            before = None
            _, before = window_run(function, args, seed, root, rest)
            measured_against(before, totals, whole=False)
            rest = before.rest
    except Refused:
        raise
    except Exception as exc:  # the run as asked succeeded: the change is what a later part cannot take
        if out_of_memory(exc):  # unless the process ran out of memory: the server's limit, not the change's fault
            raise
        raise Refused(f"interventions: {in_words(steps)} gives values that a later part of the model cannot "
                      f"take (it stopped with {type(exc).__name__}); try a factor nearer 1, another action or another "
                      "node") from None
    for index, count in enumerate(applied):
        if not count:
            raise Refused(f"interventions[{index}].node: {steps[index].node} does not run for this input")
    return {"before": plain, "after": result, "effects": relative(totals), "plain_run_cached": cached}
