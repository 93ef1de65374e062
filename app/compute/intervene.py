"""Interventions, inside a recipe process: a lab entry run as asked, then again with modules' outputs (or
one attention head's context) zeroed, averaged, scaled or patched, and how much every module changed.

The recipe is not told: forward hooks on every module (torch's global module hooks) name each call by the
recorded graph's rule (`blocks.0.act`, its second call `blocks.0.act#2`, counted per forward of the model)
and change the outputs the request names. The domain tier has checked the request against the graph; what
only a run can tell (a node this input never reaches, a patch source of another shape, a head past the
module's count) is refused here with status 400 and the field at fault.
"""

import gc
import json
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from ..domain.lru import SizedLRU

EPSILON = 1e-12  # below this norm an output counts as zero when its change is measured


class Refused(ValueError):
    """The request cannot be run as asked; the message starts with the field at fault."""

    status = 400


# Every module's name in its outermost model, kept while the module lives (a recipe's cached checkpoint
# model is named once per process; a model built per request is named from itself, cheaply).
NAMES: "weakref.WeakKeyDictionary[nn.Module, str]" = weakref.WeakKeyDictionary()
# The model each module was first registered in while a run was hooked (a recipe that builds its model per
# request): its outermost model is found by walking up, not by searching every object in the process.
PARENTS: "weakref.WeakKeyDictionary[nn.Module, weakref.ref]" = weakref.WeakKeyDictionary()


def registered(parent: nn.Module, name: str, child: nn.Module | None) -> None:
    if child is not None and child not in PARENTS:
        PARENTS[child] = weakref.ref(parent)


def outermost(module: nn.Module) -> nn.Module | None:
    """The outermost model holding `module` where it was built during a hooked run, else None."""
    found = module
    while (parent := PARENTS.get(found)) is not None and (parent := parent()) is not None:
        found = parent
    return None if found is module else found


class Tracker:
    """Names every module call of a run by the graph's rule and lets hooks read or replace its tensors.

    A module of the recorded model's class (`root`) names its parts itself. A recipe may also call a model's
    parts one by one (a trace runs the embeddings, then each layer); a part not named yet is named in the
    outermost model holding it: walked up to where the model was built during the run, else searched for
    among every model in the process (once per model: the names are kept)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.calls: dict[str, int] = {}

    @staticmethod
    def name_from(model: nn.Module) -> None:
        for name, module in model.named_modules():
            NAMES[module] = name

    def discover(self) -> None:
        modules = [o for o in gc.get_objects() if issubclass(type(o), nn.Module)]  # type(): no lazy proxy wakes
        inner = {id(child) for m in modules for child in m.children()}
        for root in sorted((m for m in modules if id(m) not in inner), key=lambda m: sum(1 for _ in m.modules())):
            self.name_from(root)  # the largest model names last

    def node(self, module: nn.Module) -> str | None:
        """The graph node of this call of the module, counted per forward of its model."""
        if module not in NAMES:
            if type(module).__name__ == self.root:
                self.name_from(module)
            elif (model := outermost(module)) is not None:
                self.name_from(model)
            else:
                self.discover()
        name = NAMES.get(module)
        if name == "":  # a forward of the whole model: its modules' calls are counted afresh
            self.calls = {}
            return None
        if name is None:
            return None
        self.calls[name] = self.calls.get(name, 0) + 1
        return name if self.calls[name] == 1 else f"{name}#{self.calls[name]}"


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


def changed(tensor: Tensor, item: dict, where: str, source: Tensor | None, module: nn.Module) -> Tensor:
    """The tensor with the intervention applied; `item["head"]` picks one head's slice of the last axis."""
    if "head" in item:
        count = item["heads"] if isinstance(item["heads"], int) else getattr(module, item["heads"], None)
        if not isinstance(count, int) or not 0 <= item["head"] < count:
            raise Refused(f"{where}.head: {item['head']} is not a head of {item['node']} ({count} heads)")
        split = tensor.unflatten(-1, (count, -1))  # (..., heads, head_dim)
        head = split[..., item["head"], :]
        source_head = None if source is None else source.unflatten(-1, (count, -1))[..., item["head"], :]
        new = split.clone()
        new[..., item["head"], :] = changed(head, {k: v for k, v in item.items() if k != "head"}, where, source_head,
                                            module)
        return new.flatten(-2)
    # Every replacement stays a function of the tensor, so that a recipe that differentiates through the
    # model (a saliency map) still can: a zeroed part passes no gradient, and a patch passes it on as the
    # unpatched output would (its value is the source's exactly), so that patching a run with itself is a no-op.
    action = item["action"]
    if action == "zero":
        return tensor * 0.0
    if action == "scale":
        return tensor * item["factor"]
    if action == "mean":
        dims = positions(tensor, where)
        return tensor.mean(dim=dims, keepdim=True).expand_as(tensor).clone()
    if source is None:
        raise Refused(f"{where}.from_case: the source run never reached {item['node']}")
    if source.shape != tensor.shape:
        raise Refused(f"{where}.from_case: its {item['node']} has shape {list(source.shape)}, this input's "
                      f"{list(tensor.shape)}")
    return source + (tensor - tensor.detach())


@contextmanager
def hooked(on_input: Callable, on_output: Callable, root: str):
    """Global forward hooks for the duration of a run: every module's input and output pass through."""
    tracker = Tracker(root)
    current: list[str | None] = []

    def before(module: nn.Module, args: tuple):
        node = tracker.node(module)
        current.append(node)
        return on_input(module, node, args) if node else None

    def after(module: nn.Module, args: tuple, output: Any):
        node = current.pop()
        return on_output(module, node, output) if node else None

    handles = [nn.modules.module.register_module_forward_pre_hook(before),
               nn.modules.module.register_module_forward_hook(after),
               nn.modules.module.register_module_module_registration_hook(registered)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_recording(function: Callable, args: dict, wanted: Callable[[str], bool], inputs: set[str], root: str) -> tuple:
    """The entry's result, and the outputs of every node `wanted` names (the inputs of those in `inputs`)."""
    seen: dict[str, Tensor] = {}

    def on_input(module, node, call_args):
        if node in inputs and call_args and isinstance(call_args[0], Tensor):
            seen[f"{node}:input"] = call_args[0].detach().clone()

    def on_output(module, node, output):
        tensor = first_tensor(output)
        if tensor is not None and wanted(node):
            seen[node] = tensor.detach().clone()

    with hooked(on_input, on_output, root):
        result = function(**args)
    return result, seen


def effects(before: dict[str, Tensor], after: dict[str, Tensor]) -> dict[str, float]:
    """How much each node's output moved: ||after - before|| / ||before||, 0 where it did not move.

    All nodes at once (their values laid end to end, each node's squares summed by index): a norm per node
    took a fifth of an intervention on a model of a few hundred calls."""
    nodes = [node for node, old in before.items()
             if (new := after.get(node)) is not None and new.shape == old.shape and old.is_floating_point()]
    if not nodes:
        return {}
    old = torch.cat([before[node].reshape(-1) for node in nodes]).double()
    new = torch.cat([after[node].reshape(-1) for node in nodes]).double()
    owner = torch.repeat_interleave(torch.arange(len(nodes)), torch.tensor([before[node].numel() for node in nodes]))
    scale = torch.zeros(len(nodes), dtype=torch.float64).index_add_(0, owner, old * old).sqrt().tolist()
    moved = torch.zeros(len(nodes), dtype=torch.float64).index_add_(0, owner, (new - old) ** 2).sqrt().tolist()
    return {node: m / s if s > EPSILON else m for node, s, m in zip(nodes, scale, moved, strict=True)}


def tensor_bytes(tensors: dict[str, Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def plain_run(function: Callable, args: dict, seed: int, root: str, memo: SizedLRU | None, key: str | None) -> tuple:
    """The entry's result on `args` as asked and every node's output, kept in `memo` under `key` (which names
    the recipe's content, the checkpoint, torch and the seed): a reader who stacks changes on one input runs
    it unchanged once. The kept tensors are never written to: `after` is compared with them, not into them."""
    found = memo.get(key) if memo is not None and key else None
    if found is not None:
        return found
    torch.manual_seed(seed)  # each run starts from the seed, as a plain run does: sampling draws the same
    plain, before = run_recording(function, args, lambda node: True, set(), root)
    if memo is not None and key:
        memo.put(key, (plain, before), tensor_bytes(before) + len(json.dumps(plain, default=str)))
    return plain, before


def intervene(function: Callable, args: dict, interventions: list[dict], sources: list[dict], seed: int,
              root: str, memo: SizedLRU | None = None, key: str | None = None) -> dict:
    """The entry run on `args`, then with the interventions; `sources[i]` is the request whose run a patch
    with `source: i` takes its tensor from. Each intervention names its `node`, `action`, and where it
    acts: `on` "output" of the node, or "input" of `target` (a head's projection), with `head`/`heads`.
    `root` is the class name of the recorded model, whose modules the graph names; the run as asked is
    taken from `memo` where `key` finds it (plain_run)."""
    patched: dict[int, dict[str, Tensor]] = {}
    for index, source in enumerate(sources):
        torch.manual_seed(seed)
        targets = {i["target"] for i in interventions if i.get("source") == index}
        inputs = {i["target"] for i in interventions if i.get("source") == index and i["on"] == "input"}
        patched[index] = run_recording(function, source, lambda node, t=targets: node in t, inputs, root)[1]
    plain, before = plain_run(function, args, seed, root, memo, key)
    applied = [0] * len(interventions)
    after: dict[str, Tensor] = {}

    def apply(module, node, value, on: str):
        tensor = first_tensor(value)
        if tensor is None:
            return None
        for index, item in enumerate(interventions):
            if item["target"] != node or item["on"] != on:
                continue
            where = f"interventions[{index}]"
            source = patched.get(item.get("source"), {}).get(node if on == "output" else f"{node}:input")
            # A head's count may be an attribute of the attention module, whose call is under way.
            tensor = changed(tensor, item, where, source, module if on == "output" else called[item["node"]])
            applied[index] += 1
        if on == "output":
            after[node] = tensor.detach().clone()
        return replace_first(value, tensor)

    called: dict[str, nn.Module] = {}  # node -> the module making that call

    def on_input(module, node, call_args):
        called[node] = module
        if not any(i["target"] == node and i["on"] == "input" for i in interventions):
            return None
        return apply(module, node, call_args, "input")

    def on_output(module, node, output):
        return apply(module, node, output, "output")

    torch.manual_seed(seed)
    with hooked(on_input, on_output, root):
        result = function(**args)
    for index, count in enumerate(applied):
        if not count:
            raise Refused(f"interventions[{index}].node: {interventions[index]['node']} does not run for this input")
    return {"before": plain, "after": result, "effects": effects(before, after)}
