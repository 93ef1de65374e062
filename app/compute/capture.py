"""The recorder's capture: runs inside a recipe worker (it imports torch) and traces the real model.

The model runs once on the recipe's declared example inputs. Forward hooks tell which module is
running; a TorchFunctionMode sees every torch function and tensor method called directly in a group
module's `forward` (ops inside a leaf module belong to that module). Every call of a module is a node of
its own (a module called twice is two nodes that name the one module), and every argument of `forward` is
an input node of its own, so the graph follows the calls and is acyclic: a node is made when its call
starts, and its inputs were made before it. Data flow follows the tensors themselves: each op's inputs are
connected to the nodes that produced them. Source spans come from the code as it is now: the statement
where each op runs, and where each module is declared and called.
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

from ..domain.recipes import load_module

# Size attributes a module's node shows as its parameters (hyper-parameters that are not sizes are left out).
SIZE_ATTRIBUTES = ("in_features", "out_features", "num_embeddings", "embedding_dim", "normalized_shape",
                   "in_channels", "out_channels", "kernel_size", "stride", "padding", "num_features",
                   "start_dim")
# Python operators reach torch as dunder methods; name them as the torch function they compute.
OPERATORS = {"add": "add", "radd": "add", "iadd": "add", "sub": "sub", "rsub": "sub", "mul": "mul", "rmul": "mul",
             "truediv": "div", "rtruediv": "div", "matmul": "matmul", "rmatmul": "matmul", "pow": "pow",
             "neg": "neg"}
# Indexing is Python syntax, not a torch function: `att[:, h]` is shown as what it is.
INDEXING = {"getitem": ("index", "indexing"), "setitem": ("index_put", "index assignment")}
# Calls that only read metadata, or hand back what they were given, are not steps of the computation.
# (Property reads, `__get__`, are filtered by their result: `.device` is no tensor, `.T` is.)
SKIPPED = {"size", "dim", "numel", "item", "tolist", "__len__", "__format__", "__bool__",
           "__index__", "__int__", "__float__", "__repr__", "__hash__", "__eq__", "__ne__", "data_ptr",
           "is_floating_point", "requires_grad_", "__iter__", "__contains__", "stride", "contiguous",
           "element_size", "storage_offset", "__reduce_ex__", "__deepcopy__", "register_hook", "_is_view"}
# Positional parameter names of the common tensor methods, so that a node shows `dim=1`, not `arg1=1`.
ARG_NAMES = {"flatten": ("start_dim", "end_dim"), "unflatten": ("dim", "sizes"), "transpose": ("dim0", "dim1"),
             "softmax": ("dim",), "cat": ("tensors", "dim"), "split": ("split_size", "dim"),
             "masked_fill": ("mask", "value"), "triu": ("diagonal",), "tril": ("diagonal",), "mean": ("dim",),
             "sum": ("dim",), "arange": ("end",), "unsqueeze": ("dim",), "squeeze": ("dim",), "pow": ("exponent",)}
# Calls whose sizes may be written out one by one (`x.view(B, T, H, d)`) or as one tuple: one parameter.
SIZES = {"view": "shape", "reshape": "shape", "expand": "size", "repeat": "repeats", "permute": "dims",
         "tile": "dims", "zeros": "size", "ones": "size", "empty": "size", "rand": "size", "randn": "size",
         "new_zeros": "size", "new_ones": "size", "new_empty": "size"}
FILLS = ("ones", "zeros", "arange")


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


def index_text(index) -> str:
    """An index as it is written in Python: `[:, :, :6, :6]`, `[0]`, `[..., None]`."""
    def one(part) -> str:
        if isinstance(part, slice):
            text = ":".join("" if v is None else one(v) for v in (part.start, part.stop, part.step))
            return text.removesuffix(":") if part.step is None else text
        if part is Ellipsis:
            return "..."
        if isinstance(part, torch.Tensor):
            return "tensor" if part.dim() else str(part.item())
        return repr(part)

    parts = index if isinstance(index, tuple) else (index,)
    return "[" + ", ".join(one(p) for p in parts) + "]"


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


def _span(node: ast.AST) -> dict:
    return {"line": node.lineno, "endLine": node.end_lineno or node.lineno}


def declaration(owner: nn.Module, attribute: str, source_file: str) -> ast.stmt | None:
    """The statement `self.<attribute> = ...` in the owner's class (or a base class) in the source file."""
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
                        return stmt
    return None


def _container_item(node: ast.AST, index: str) -> ast.AST | None:
    """Inside a container's declaration, the expression that builds item `index`: the index-th argument of
    `nn.Sequential(a, b, c)`, the index-th element of `nn.ModuleList([a, b])`, or the element expression of
    a comprehension (`[Block(config) for _ in range(n)]`). None where the source does not say (`*layers`)."""
    if not index.isdigit():
        return None
    position = int(index)
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name == "Sequential" and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            return call.args[position] if position < len(call.args) else None
        if name == "ModuleList" and call.args:
            items = call.args[0]
            if isinstance(items, ast.List | ast.Tuple) and position < len(items.elts) and not any(
                    isinstance(e, ast.Starred) for e in items.elts[:position + 1]):
                return items.elts[position]
            if isinstance(items, ast.ListComp | ast.GeneratorExp):
                return items.elt
            return None
    return None


def module_declaration(model: nn.Module, name: str, source_file: str) -> dict | None:
    """Where a submodule is declared: its own `self.x = ...`, or, for an item of an `nn.Sequential` or a
    `ModuleList`, the expression inside the container's declaration that builds it."""
    parts, items = name.split("."), []
    stmt = None
    while parts and stmt is None:
        owner_name, attribute = ".".join(parts[:-1]), parts[-1]
        stmt = declaration(model.get_submodule(owner_name) if owner_name else model, attribute, source_file)
        if stmt is None:
            items.insert(0, attribute)
            parts.pop()
    if stmt is None:
        return None
    node: ast.AST = stmt
    for index in items:
        inner = _container_item(node, index)
        if inner is None:
            break
        node = inner
    return _span(node)


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


def shared_parameters(model: nn.Module) -> dict[str, dict[str, list[str]]]:
    """Parameters one module shares with others (tied weights): module -> parameter -> the others' names."""
    holders: dict[int, list[str]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for param_name, param in module.named_parameters(recurse=False):
            holders.setdefault(id(param), []).append(f"{module_name}.{param_name}" if module_name else param_name)
    shared: dict[str, dict[str, list[str]]] = {}
    for names in holders.values():
        for full in names:
            module_name, _, param_name = full.rpartition(".")
            others = [n for n in names if n != full]
            if others:
                shared.setdefault(module_name, {})[param_name] = others
    return shared


@dataclass
class Capture:
    """The graph as it is being traced."""

    source_file: str
    root_name: str
    layers: dict[str, dict] = field(default_factory=dict)
    edges: dict[tuple[str, str], None] = field(default_factory=dict)  # ordered set
    producers: dict[int, str] = field(default_factory=dict)
    alive: list = field(default_factory=list)  # tensors seen, kept alive so that their ids stay unique
    counters: dict[str, int] = field(default_factory=dict)
    calls: dict[str, list[str]] = field(default_factory=dict)  # module name -> the node of each call
    order: list[str] = field(default_factory=list)  # node ids in the order they ran
    scopes: list[str] = field(default_factory=list)  # node ids of the module calls now running ("" for the model)
    running: list[str] = field(default_factory=list)  # the modules of those calls, by name
    holders: set[str] = field(default_factory=set)  # containers that hold calls without being called
    weights: dict[int, str] = field(default_factory=dict)  # the model's parameters and buffers by id: their names
    leaf_depth: int = 0

    def connect(self, values, target: str) -> None:
        for tensor in _tensors(values):
            source = self.producers.get(id(tensor))
            if source is not None and source != target:
                self.edges[(source, target)] = None

    def produced(self, values, source: str) -> None:
        for tensor in _tensors(values):
            self.producers[id(tensor)] = source
            self.alive.append(tensor)

    def scope(self) -> str | None:
        return self.scopes[-1] if self.scopes and self.scopes[-1] else None

    def add(self, layer: dict) -> None:
        if layer["id"] in self.layers:  # one node per call: an id made twice is a capture bug, not a graph
            raise ValueError(f"the graph's node {layer['id']!r} would be recorded twice")
        self.layers[layer["id"]] = layer
        self.order.append(layer["id"])

    def parent_of(self, name: str, declared: dict[str, dict]) -> str | None:
        """The node that holds a call of module `name`: the running call of the module that owns it; for a
        container that is never called itself (a ModuleList, a Sequential walked by a loop), a node for the
        container, made once; else, for a module called from elsewhere, the call now running."""
        owner = name.rpartition(".")[0]
        if not owner:
            return None
        if owner in self.running:
            return self.scopes[len(self.running) - 1 - self.running[::-1].index(owner)] or None
        if owner not in self.calls:
            self.calls[owner] = [owner]
            self.holders.add(owner)
            self.add(dict(declared[owner], parent=self.parent_of(owner, declared)))
        return owner if owner in self.holders else self.scope()

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
    if short in SIZES and positional and all(isinstance(v, int) for v in positional):
        positional = (list(positional),)  # x.view(B, T, H, d): one shape, not four arguments
    names = (SIZES[short],) if short in SIZES else ARG_NAMES.get(short, ())
    params = {names[i] if i < len(names) else f"arg{i}": plain
              for i, value in enumerate(positional) if (plain := _plain(value)) is not None}
    return params | {k: plain for k, v in kwargs.items() if (plain := _plain(v)) is not None}


# Calls whose other tensor gives only a shape or a dtype (`x.view_as(y)`): no data flows from it.
SHAPE_OF_OTHER = {"view_as", "reshape_as", "expand_as", "type_as"}
# Calls whose tensors give only a shape, a dtype or a device (`zeros_like(x)`, `x.new_zeros(...)`): no data flows.
SHAPE_ONLY = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
              "new_zeros", "new_ones", "new_empty", "new_full"}


def _uses(name: str, args: tuple, kwargs: dict) -> tuple[tuple, tuple]:
    """A call's arguments split into those whose values flow into its result, and those that give a shape alone."""
    if name in SHAPE_ONLY:
        return (), (args, kwargs)
    if name in SHAPE_OF_OTHER and len(args) > 1:
        return (args[:1], {}), (args[1:], kwargs)
    return (args, kwargs), ()


def _op_name(func) -> tuple[str, str]:
    """(short name for the node id, op shown on the node) of a torch function or tensor method."""
    name = getattr(func, "__name__", repr(func))
    bare = name.strip("_")
    if name.startswith("__") and bare in OPERATORS:
        return OPERATORS[bare], f"torch.{OPERATORS[bare]}"
    if name.startswith("__") and bare in INDEXING:
        return INDEXING[bare]
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
        if c.leaf_depth or not _tensors(result):
            return result
        if name in SKIPPED:  # `.contiguous()` may copy: the copy carries what its input carried
            source = c.producers.get(id(args[0])) if args and isinstance(args[0], torch.Tensor) else None
            if source is not None:
                c.produced(result, source)
            return result
        short, op = _op_name(func)
        if name == "__get__":  # a tensor property that returns a tensor (.T, .mT)
            short, op = "property", "Tensor property"
        scope = c.scope()
        where = scope or c.root_name
        index = c.counters.get(f"{short}@{where}", 0)
        c.counters[f"{short}@{where}"] = index + 1
        node_id = f"{short}@{where}#{index}"
        params = {"index": index_text(args[1])} if short in ("index", "index_put") and len(args) > 1 \
            else _params(short, args, kwargs)
        data, shaped = _uses(name, args, kwargs)
        used = [c.weights[id(t)] for t in _tensors(data) if id(t) in c.weights]
        if used:  # a parameter or buffer of the model used directly (`x + self.bias`): named, not drawn
            params["weights"] = used
        shapes = [c.producers[id(t)] for t in _tensors(shaped) if id(t) in c.producers]
        if shapes:  # `x.view_as(y)`: y gives a shape, no data; said, not drawn as an edge
            params["shape_of"] = shapes
        layer = {"id": node_id, "label": node_id, "op": op, "kind": "layer", "parent": scope, "params": params}
        site = c.call_site()
        if site:
            layer["source"] = site
        c.add(layer)
        c.connect(data, node_id)
        c.produced(result, node_id)
        return result


def _module_node(model: nn.Module, name: str, module: nn.Module, source_file: str) -> dict:
    """A module's node as declared: leaves as layers, containers as groups (named by their class)."""
    group = any(True for _ in module.children())
    layer = {"id": name, "label": name, "op": "Module" if group else type(module).__name__,
             "kind": "module" if group else "layer", "parent": None, "params": {} if group else module_params(module)}
    if group:
        layer["className"] = type(module).__name__
    span = module_declaration(model, name, source_file)
    if span:
        layer["source"] = span
    return layer


def _hooks(model: nn.Module, capture: Capture) -> list:
    """Pre- and post-forward hooks on every module: scope tracking, a node per module call, data flow."""
    handles = []
    names = {module: name for name, module in model.named_modules()}
    declared = {name: _module_node(model, name, module, capture.source_file) for module, name in names.items() if name}
    for module, name in names.items():
        leaf = not any(True for _ in module.children())

        def before(mod, args, kwargs, name=name, leaf=leaf):
            c = capture
            if c.leaf_depth:
                c.leaf_depth += leaf
                return
            if not name:  # the model itself is the page, not a node
                c.scopes.append("")
                c.running.append("")
                return
            parent = c.parent_of(name, declared)
            calls = c.calls.setdefault(name, [])
            node_id = name if not calls else f"{name}#{len(calls) + 1}"
            calls.append(node_id)
            layer = dict(declared[name], id=node_id, label=node_id, parent=parent)
            site = c.call_site()
            if site:
                layer["callSource"] = site
            c.add(layer)
            c.scopes.append(node_id)
            c.running.append(name)
            if leaf:
                c.connect((args, kwargs), node_id)
                c.leaf_depth += 1

        def after(mod, args, kwargs, output, leaf=leaf):
            c = capture
            if leaf:
                c.leaf_depth -= 1
                if c.leaf_depth:
                    return
            node_id = c.scopes.pop()
            c.running.pop()
            if leaf:
                c.produced(output, node_id)

        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    return handles


def _mark_calls(capture: Capture, shared: dict[str, dict[str, list[str]]]) -> None:
    """A module called more than once: each call's node says which module it calls and which call it is;
    a module holding a parameter of another (tied weights) says so on every call's node."""
    for name, nodes in capture.calls.items():
        if name in capture.holders and len(nodes) == 1:
            continue  # a container that was never called: its items are the calls
        for number, node_id in enumerate(nodes, 1):
            layer = capture.layers[node_id]
            if len(nodes) > 1:
                layer |= {"label": f"{name} ({number}/{len(nodes)})", "module": name, "call": number,
                          "calls": len(nodes)}
            if name in shared:
                layer["sharedParams"] = shared[name]


def example_inputs(specs: list[dict]) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """The example inputs a recipe declares, positional and by keyword (`name`): a shape with a fill (ones,
    zeros or arange) or explicit `values`, and a dtype (float32 unless given)."""
    args, kwargs = [], {}
    for i, spec in enumerate(specs):
        where = f"recording.inputs[{i}]"
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: must be a table with a shape or values")
        unknown = sorted(set(spec) - {"name", "shape", "dtype", "fill", "values"})
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} (name, shape, dtype, fill, values)")
        dtype = getattr(torch, str(spec.get("dtype", "float32")), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{where}: dtype {spec.get('dtype')!r} is not a torch dtype")
        if "values" in spec:
            if "fill" in spec:
                raise ValueError(f"{where}: give values or a fill, not both")
            try:
                tensor = torch.tensor(spec["values"], dtype=dtype)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ValueError(f"{where}: values are not a rectangular array of numbers ({exc})") from exc
            if "shape" in spec and list(tensor.shape) != list(spec["shape"]):
                raise ValueError(f"{where}: values have shape {list(tensor.shape)}, not the declared {spec['shape']}")
        else:
            shape = spec.get("shape")
            if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
                raise ValueError(f"{where}: shape must be a list of sizes (or give values)")
            fill = spec.get("fill", "ones")
            if fill == "arange":
                tensor = torch.arange(math.prod(shape)).reshape(shape).to(dtype)
            elif fill in FILLS:
                tensor = getattr(torch, fill)(tuple(shape), dtype=dtype)
            else:
                raise ValueError(f"{where}: fill {fill!r} is not one of {', '.join(FILLS)}")
        if "name" in spec:
            if not isinstance(spec["name"], str) or not spec["name"].isidentifier():
                raise ValueError(f"{where}: name must be a parameter name of forward()")
            kwargs[spec["name"]] = tensor
        elif kwargs:
            raise ValueError(f"{where}: a positional input follows a named one")
        else:
            args.append(tensor)
    return args, kwargs


def input_nodes(model: nn.Module, args: list, kwargs: dict) -> dict[str, torch.Tensor]:
    """Each argument of forward() by its parameter's name (`xs[0]`, `xs[1]` for `*xs`)."""
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError as exc:
        parameters = ", ".join(inspect.signature(model.forward).parameters)
        raise ValueError(f"recording.inputs do not fit forward({parameters}): {exc}") from exc
    named = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named |= {f"{name}[{i}]": v for i, v in enumerate(value)}
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named |= value
        else:
            named[name] = value
    return named


def made_inputs(made) -> tuple[list[torch.Tensor], dict[str, torch.Tensor], list[dict]]:
    """What model.py's example_inputs() returned, as forward()'s arguments: a tensor, a tuple or list of them
    (positional), or a dict of them (by name); with each described as the manifest records an input."""
    args, kwargs = ([], made) if isinstance(made, dict) else (list(made), {}) if isinstance(made, tuple | list) \
        else ([made], {})
    tensors = [*args, *kwargs.values()]
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors) \
            or not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
        raise ValueError("model.py's example_inputs() must return a tensor, a tuple of tensors or a dict of them "
                         "by forward()'s parameter names")
    described = [({"name": name} if name is not None else {}) | {
        "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "madeBy": "example_inputs()"}
        for name, t in [*((None, a) for a in args), *kwargs.items()]]
    return args, kwargs, described


@torch.no_grad()
def trace_graph(recipe_dir: Path, inputs: list[dict] | None, **context) -> dict:
    """The model's graph: layers (module calls, groups, ops, inputs, output) and connections by data flow. The
    example inputs are the declared ones (`inputs`), else what model.py's example_inputs() makes."""
    model_module = load_module(recipe_dir, "model")
    model = model_module.build_model(**context)
    source_file = inspect.getsourcefile(model_module)
    capture = Capture(source_file=source_file, root_name=type(model).__name__)
    capture.weights = {id(t): name for name, t in [*model.named_buffers(), *model.named_parameters()]}
    if inputs is not None:
        args, kwargs = example_inputs(inputs)
    elif callable(getattr(model_module, "example_inputs", None)):
        torch.manual_seed(0)  # example inputs a recipe draws at random are drawn alike every time
        args, kwargs, inputs = made_inputs(model_module.example_inputs())
    else:
        raise ValueError("recipe.toml declares no recording.inputs and model.py has no example_inputs(): the "
                     "graph needs example inputs to trace")
    for name, value in input_nodes(model, args, kwargs).items():
        if isinstance(value, torch.Tensor):
            node_id = f"input:{name}"
            capture.add({"id": node_id, "label": name, "op": "Input", "kind": "input", "parent": None,
                         "params": {"shape": ",".join(map(str, value.shape)), "dtype": str(value.dtype)}})
            capture.produced(value, node_id)
    handles = _hooks(model, capture)
    try:
        with _Tracer(capture):
            output = model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    _mark_calls(capture, shared_parameters(model))
    # The model's output is the node `output`, unless a module of the model is named so (an output layer).
    out = "output" if "output" not in capture.layers else "output:model"
    capture.add({"id": out, "label": "output", "op": "Output", "kind": "output", "parent": None, "params": {}})
    capture.connect(output, out)
    first = _tensors(output)[0]
    # Nodes the data did not flow through (a computation whose result was never used) would float
    # unconnected: keep the nodes on a path to the output, the inputs, and the groups that hold them.
    used = _reaching(capture.edges, out)
    for node in list(used):
        parent = capture.layers[node]["parent"]
        while parent and parent not in used:
            used.add(parent)
            parent = capture.layers[parent]["parent"]
    layers = [layer for layer in capture.layers.values() if layer["id"] in used or layer["kind"] == "input"]
    edges = [(s, t) for s, t in capture.edges if s in used and t in used]
    return {
        "className": type(model).__name__,
        "layers": _ordered(layers, capture.order),
        "connections": [{"id": f"edge-{i}", "source": s, "target": t, "sourcePort": None, "targetPort": None}
                        for i, (s, t) in enumerate(edges, 1)],
        "outputShape": list(first.shape),
        "sourceFile": Path(source_file).name,
        "inputs": inputs,
    }


def _reaching(edges, sink: str) -> set[str]:
    """Every node with a path to `sink`."""
    into: dict[str, list[str]] = {}
    for source, target in edges:
        into.setdefault(target, []).append(source)
    seen, stack = {sink}, [sink]
    while stack:
        for source in into.get(stack.pop(), []):
            if source not in seen:
                seen.add(source)
                stack.append(source)
    return seen


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


def capture(recipe_dir: str, inputs: list[dict] | None, **context) -> dict:
    """Everything the recorder needs from running the recipe: the traced graph and the replay. `context`
    holds the server's own arguments (a checkpoint folder), given to build_model() and replay() alike."""
    recipe = Path(recipe_dir)
    graph = trace_graph(recipe, inputs, **context)
    replay_of = load_module(recipe, "run").replay
    torch.manual_seed(0)
    replay = replay_of(**context)
    cases = list(replay.get("cases", {}))
    return {"graph": graph, "replay": replay, "each_case": each_case_alone(replay_of, cases, context)}


def each_case_alone(replay_of, cases: list[str], context: dict) -> dict:
    """Each case replayed alone (`replay(case=...)`), as What if? and the training stages run one, from the same
    seed as the whole replay; a case that cannot be is said in words (a replay that takes no `case`, an error)."""
    found: dict = {}
    for case in cases:
        torch.manual_seed(0)
        try:
            found[case] = replay_of(case=case, **context).get("cases", {}).get(case)
        except Exception as exc:  # reported by the recorder, naming the case
            found[case] = f"{type(exc).__name__}: {exc}"
    return found
