"""The recorder's capture: runs inside a recipe worker (it imports torch) and traces the real model.

The model runs once on the recipe's declared example inputs. Forward hooks tell which module is
running; a TorchFunctionMode sees every torch function and tensor method called directly in a group
module's `forward` (ops inside a leaf module belong to that module). Data flow follows the tensors
themselves: each op's inputs are connected to the nodes that produced them. Source spans come from the
code as it is now: the statement where each op runs, and where each module is declared and called.
"""

import ast
import inspect
import math
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .recipes import load_module

# Size attributes a module's node shows as its parameters (hyper-parameters that are not sizes are left out).
SIZE_ATTRIBUTES = ("in_features", "out_features", "num_embeddings", "embedding_dim", "normalized_shape",
                   "in_channels", "out_channels", "kernel_size", "stride", "padding", "num_features",
                   "start_dim")
# Python operators reach torch as dunder methods; name them as the torch function they compute.
OPERATORS = {"add": "add", "radd": "add", "iadd": "add", "sub": "sub", "rsub": "sub", "mul": "mul", "rmul": "mul",
             "truediv": "div", "rtruediv": "div", "matmul": "matmul", "rmatmul": "matmul", "pow": "pow",
             "neg": "neg", "getitem": "getitem", "setitem": "setitem"}
# Calls that only read metadata, or hand back what they were given, are not steps of the computation.
# (Property reads, `__get__`, are filtered by their result: `.device` is no tensor, `.T` is.)
SKIPPED = {"size", "dim", "numel", "item", "tolist", "__len__", "__format__", "__bool__",
           "__index__", "__int__", "__float__", "__repr__", "__hash__", "__eq__", "__ne__", "data_ptr",
           "is_floating_point", "requires_grad_", "__iter__", "__contains__", "stride", "contiguous",
           "element_size", "storage_offset", "__reduce_ex__", "__deepcopy__", "register_hook", "_is_view"}
# Positional parameter names of the common tensor methods, so that a node shows `dim=1`, not `arg1=1`.
ARG_NAMES = {"flatten": ("start_dim", "end_dim"), "unflatten": ("dim", "sizes"), "transpose": ("dim0", "dim1"),
             "softmax": ("dim",), "cat": ("tensors", "dim"), "view": ("shape",), "reshape": ("shape",),
             "permute": ("dims",), "split": ("split_size", "dim"), "masked_fill": ("mask", "value"),
             "triu": ("diagonal",), "tril": ("diagonal",), "mean": ("dim",), "sum": ("dim",), "arange": ("end",),
             "zeros": ("size",), "ones": ("size",), "unsqueeze": ("dim",), "squeeze": ("dim",), "pow": ("exponent",)}


def _plain(value):
    """A JSON value for a small argument (ints, floats, strings, tuples of them); None for anything else."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "-inf": JSON has no infinity
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    if isinstance(value, tuple | list | torch.Size) and all(isinstance(v, int | float) for v in value):
        return list(value)
    return None


def _tensors(value) -> list[torch.Tensor]:
    """Every tensor inside an argument (tuples, lists and dicts included)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


@cache
def _syntax(source: str) -> ast.Module:
    """A source text's syntax tree, parsed once per text: keyed by content, so an edited file is parsed anew."""
    return ast.parse(source)


@cache
def _statement_spans(source: str) -> list[tuple[int, int]]:
    return [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(_syntax(source))
            if isinstance(node, ast.stmt)]


def _statements(path: str) -> list[tuple[int, int]]:
    """(first line, last line) of every statement in a source file, as it is on disk now."""
    return _statement_spans(Path(path).read_text())


def statement_span(path: str, line: int) -> dict:
    """The innermost statement that contains `line`: the whole statement, however many lines it takes."""
    spans = [s for s in _statements(path) if s[0] <= line <= s[1]]
    first, last = min(spans, key=lambda s: s[1] - s[0]) if spans else (line, line)
    return {"line": first, "endLine": last}


def _instruction_line(frame) -> int:
    """The line of the instruction a frame is executing (the start of a multi-line expression's part)."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if 0 <= index < len(positions) and positions[index][0] is not None:
        return positions[index][0]
    return frame.f_lineno


def declaration_span(owner: nn.Module, attribute: str, source_file: str) -> dict | None:
    """Where `self.<attribute> = ...` is written in the owner's class (or a base class) in the source file."""
    for klass in type(owner).__mro__:
        try:
            if inspect.getsourcefile(klass) != source_file:
                continue
        except TypeError:
            continue
        for node in ast.walk(_syntax(Path(source_file).read_text())):
            if not (isinstance(node, ast.ClassDef) and node.name == klass.__name__):
                continue
            for stmt in ast.walk(node):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
                    stmt, ast.AnnAssign) else []
                for target in targets:
                    if (isinstance(target, ast.Attribute) and target.attr == attribute
                            and isinstance(target.value, ast.Name) and target.value.id == "self"):
                        return {"line": stmt.lineno, "endLine": stmt.end_lineno or stmt.lineno}
    return None


def module_params(module: nn.Module) -> dict:
    params = {}
    for name in SIZE_ATTRIBUTES:
        value = getattr(module, name, None)
        if value is None or isinstance(value, bool) or name == "start_dim" and not isinstance(module, nn.Flatten):
            continue
        if isinstance(value, tuple | list):
            value = value[0] if len(value) == 1 else list(value)
        if isinstance(value, int | list):
            params[name] = value
    return params


@dataclass
class Capture:
    """The graph as it is being traced."""

    source_file: str
    root_name: str
    layers: dict[str, dict] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    producers: dict[int, str] = field(default_factory=dict)
    keep: list = field(default_factory=list)  # tensors seen, kept alive so that their ids stay unique
    counters: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # node ids in the order they first ran
    scopes: list[str] = field(default_factory=list)  # qualified names of the modules now running
    leaf_depth: int = 0

    def connect(self, values, target: str) -> None:
        for tensor in _tensors(values):
            source = self.producers.get(id(tensor))
            if source is not None and source != target and (source, target) not in self.edges:
                self.edges.append((source, target))

    def produced(self, values, source: str) -> None:
        for tensor in _tensors(values):
            self.producers[id(tensor)] = source
            self.keep.append(tensor)

    def scope_label(self) -> str:
        return self.scopes[-1] if self.scopes and self.scopes[-1] else self.root_name

    def call_site(self) -> dict | None:
        """The statement in the recipe's source that made the current call (innermost recipe frame)."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.source_file:
                return statement_span(self.source_file, _instruction_line(frame))
            frame = frame.f_back
        return None


def _params(short: str, args: tuple, kwargs: dict) -> dict:
    """The small arguments of a call, by name: what comes after the tensor it works on (a method's self,
    or a function's first argument), and every keyword."""
    positional = args[1:] if args and isinstance(args[0], torch.Tensor) else args
    names = ARG_NAMES.get(short, ())
    params = {names[i] if i < len(names) else f"arg{i}": plain
              for i, value in enumerate(positional) if (plain := _plain(value)) is not None}
    return params | {k: plain for k, v in kwargs.items() if (plain := _plain(v)) is not None}


def _op_name(func) -> tuple[str, str]:
    """(short name for the node id, op shown on the node) of a torch function or tensor method."""
    name = getattr(func, "__name__", repr(func))
    bare = name.strip("_")
    if name.startswith("__") and bare in OPERATORS:
        return OPERATORS[bare], f"torch.{OPERATORS[bare]}"
    module = getattr(func, "__module__", "") or ""
    qualname = getattr(func, "__qualname__", name)
    if module.startswith("torch.nn.functional"):
        return name, f"F.{name}"
    if qualname.startswith(("Tensor.", "TensorBase.", "_TensorBase.")) or module == "torch._tensor":
        return name, f"Tensor.{name}"
    return name, f"torch.{name}"


class _Tracer(TorchFunctionMode):
    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        c = self.capture
        name = getattr(func, "__name__", "")
        if c.leaf_depth or name in SKIPPED or not _tensors(result):
            return result
        short, op = _op_name(func)
        if name == "__get__":  # a tensor property that returns a tensor (.T, .mT)
            short, op = "property", "Tensor property"
        scope = c.scope_label()
        index = c.counters.get(f"{short}@{scope}", 0)
        c.counters[f"{short}@{scope}"] = index + 1
        node_id = f"{short}@{scope}#{index}"
        layer = {"id": node_id, "label": node_id, "op": op, "kind": "layer",
                 "parent": c.scopes[-1] if c.scopes and c.scopes[-1] else None,
                 "params": _params(short, args, kwargs)}
        site = c.call_site()
        if site:
            layer["source"] = site
        c.layers[node_id] = layer
        c.order.append(node_id)
        c.connect((args, kwargs), node_id)
        c.produced(result, node_id)
        return result


def _hooks(model: nn.Module, capture: Capture) -> list:
    """Pre- and post-forward hooks on every module: scope tracking, module nodes and their data flow."""
    handles = []
    names = {module: name for name, module in model.named_modules()}
    for module, name in names.items():
        leaf = not any(True for _ in module.children())

        def before(mod, args, kwargs, name=name, leaf=leaf):
            c = capture
            if c.leaf_depth:
                c.leaf_depth += leaf
                return
            if name and name in c.layers and "callSource" not in c.layers[name]:
                c.layers[name]["callSource"] = c.call_site()
                c.order.append(name)
            c.scopes.append(name)
            if leaf:
                c.connect((args, kwargs), name)
                c.leaf_depth += 1

        def after(mod, args, kwargs, output, name=name, leaf=leaf):
            c = capture
            if leaf:
                c.leaf_depth -= 1
                if c.leaf_depth:
                    return
            c.scopes.pop()
            if leaf:
                c.produced(output, name)

        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    return handles


def _module_layers(model: nn.Module, capture: Capture) -> None:
    """A node per submodule: leaves as layers, containers as groups; with declaration spans."""
    for name, module in model.named_modules():
        if not name:
            continue
        parent_name, _, attribute = name.rpartition(".")
        owner = model.get_submodule(parent_name) if parent_name else model
        group = any(True for _ in module.children())
        span = declaration_span(owner, attribute, capture.source_file)
        # Items of a ModuleList or ModuleDict are declared where the container is.
        while span is None and parent_name:
            parent_name, _, attribute = parent_name.rpartition(".")
            owner = model.get_submodule(parent_name) if parent_name else model
            span = declaration_span(owner, attribute, capture.source_file)
        layer = {"id": name, "label": name, "op": "Module" if group else type(module).__name__,
                 "kind": "module" if group else "layer", "parent": name.rpartition(".")[0] or None,
                 "params": {} if group else module_params(module)}
        if group:
            layer["className"] = type(module).__name__
        if span:
            layer["source"] = span
        capture.layers[name] = layer


def example_inputs(specs: list[dict]) -> list[torch.Tensor]:
    """The example inputs a recipe declares: shape, dtype and fill (ones, zeros or arange)."""
    tensors = []
    for spec in specs:
        dtype = getattr(torch, spec.get("dtype", "float32"))
        shape = tuple(spec["shape"])
        fill = spec.get("fill", "ones")
        if fill == "ones":
            tensors.append(torch.ones(shape, dtype=dtype))
        elif fill == "zeros":
            tensors.append(torch.zeros(shape, dtype=dtype))
        elif fill == "arange":
            tensors.append(torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype))
        else:
            raise ValueError(f"recording.inputs: fill {fill!r} is not one of ones, zeros, arange")
    return tensors


@torch.no_grad()
def trace_graph(recipe_dir: Path, inputs: list[dict], **context) -> dict:
    """The model's graph: layers (modules, groups, ops, input, output) and connections by data flow."""
    model_module = load_module(recipe_dir, "model")
    model = model_module.build_model(**context)
    source_file = inspect.getsourcefile(model_module)
    capture = Capture(source_file=source_file, root_name=type(model).__name__)
    capture.layers["input"] = {"id": "input", "label": "input", "op": "Input", "kind": "input", "parent": None,
                               "params": {"shape": "; ".join(",".join(map(str, s["shape"])) for s in inputs)}}
    _module_layers(model, capture)
    args = example_inputs(inputs)
    capture.produced(args, "input")
    handles = _hooks(model, capture)
    try:
        with _Tracer(capture):
            output = model(*args)
    finally:
        for handle in handles:
            handle.remove()
    capture.layers["output"] = {"id": "output", "label": "output", "op": "Output", "kind": "output",
                                "parent": None, "params": {}}
    capture.connect(output, "output")
    first = _tensors(output)[0]
    # Modules that never ran in forward (none in a tidy recipe) would float unconnected: keep only the nodes
    # the data flowed through, and the groups that hold them.
    used = {n for edge in capture.edges for n in edge}
    for node in list(used):
        parent = capture.layers[node]["parent"]
        while parent and parent not in used:
            used.add(parent)
            parent = capture.layers[parent]["parent"]
    layers = [layer for layer in capture.layers.values() if layer["id"] in used or layer["kind"] == "input"]
    return {
        "className": type(model).__name__,
        "layers": _ordered(layers, ["input", *capture.order, "output"]),
        "connections": [{"id": f"edge-{i}", "source": s, "target": t, "sourcePort": None, "targetPort": None}
                        for i, (s, t) in enumerate(capture.edges, 1)],
        "outputShape": list(first.shape),
        "sourceFile": Path(source_file).name,
    }


def _ordered(layers: list[dict], ran: list[str]) -> list[dict]:
    """Top-level nodes first, then each group's contents, scope by scope, in the order they ran."""
    order = {node_id: i for i, node_id in enumerate(ran)}
    by_parent: dict[str | None, list[dict]] = {}
    for layer in layers:
        by_parent.setdefault(layer["parent"], []).append(layer)
    result, queue = [], [None]
    while queue:
        parent = queue.pop(0)
        children = sorted(by_parent.get(parent, []), key=lambda layer: order.get(layer["id"], len(order)))
        result += children
        queue += [c["id"] for c in children if c["kind"] == "module"]
    return result


def capture(recipe_dir: str, inputs: list[dict], **context) -> dict:
    """Everything the recorder needs from running the recipe: the traced graph and the replay. `context`
    holds the server's own arguments (a checkpoint folder), given to build_model() and replay() alike."""
    recipe = Path(recipe_dir)
    graph = trace_graph(recipe, inputs, **context)
    torch.manual_seed(0)
    replay = load_module(recipe, "run").replay(**context)
    return {"graph": graph, "replay": replay}
