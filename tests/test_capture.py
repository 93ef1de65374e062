"""The traced graph follows the calls: throwaway recipes with a module called twice, a shared embedding
over two inputs, named inputs with explicit values, Sequential items, indexing and sizes."""

import json
import textwrap
from pathlib import Path

import pytest

from app.compute.capture import trace_graph
from app.services.config import PROJECT_ROOT

RESNET = '''
import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.act = nn.ReLU()  # torchvision's idiom: one ReLU module, called twice
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(width)

    def forward(self, x):
        out = self.act(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act(out + x)


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.ReLU(),
        )
        self.blocks = nn.ModuleList([BasicBlock(4) for _ in range(2)])
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        b, c, h, w = x.shape
        x = x.view(b, c, h * w).mean(-1)
        return self.head(x)


def build_model():
    torch.manual_seed(0)
    return TinyResNet().eval()
'''

SEQ2SEQ = '''
import torch
from torch import nn


class Seq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)  # one table for source and target
        self.encoder = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight  # tied

    def forward(self, src, tgt, scale: float = 1.0):
        memory = self.encoder(self.embed(src)).mean(1, keepdim=True)  # (B, 1, C)
        y = self.decoder(self.embed(tgt))  # (B, T, C)
        att = (y @ memory.transpose(1, 2)).softmax(-1)  # (B, T, 1)
        return self.out(y + att[:, :, 0:1] * memory * scale)


def build_model():
    torch.manual_seed(0)
    return Seq2Seq().eval()
'''

RNN = '''
import torch
from torch import nn


class Unrolled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.RNNCell(3, 3)

    def forward(self, xs):
        h = torch.zeros(xs.size(0), 3)
        for t in range(xs.size(1)):
            h = self.cell(xs[:, t], h)
        return h


def build_model():
    torch.manual_seed(0)
    return Unrolled().eval()
'''


def recipe(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "throwaway"
    folder.mkdir(exist_ok=True)
    (folder / "model.py").write_text(textwrap.dedent(source))
    return folder


def layers(graph: dict) -> dict[str, dict]:
    return {layer["id"]: layer for layer in graph["layers"]}


def successors(graph: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for edge in graph["connections"]:
        out.setdefault(edge["source"], set()).add(edge["target"])
    return out


def reachable(graph: dict, start: str) -> set[str]:
    after, seen, stack = successors(graph), set(), [start]
    while stack:
        for node in after.get(stack.pop(), ()):
            if node not in seen:
                seen.add(node)
                stack.append(node)
    return seen


def assert_acyclic(graph: dict) -> None:
    for layer in graph["layers"]:
        assert layer["id"] not in reachable(graph, layer["id"]), f"a cycle through {layer['id']}"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_module_called_twice_is_two_nodes_each_with_its_line(tmp_path):
    folder = recipe(tmp_path, RESNET)
    graph = trace_graph(folder, [{"shape": [1, 1, 4, 4]}])
    nodes = layers(graph)
    first, second = nodes["blocks.0.act"], nodes["blocks.0.act#2"]
    assert first["module"] == second["module"] == "blocks.0.act"
    assert (first["call"], second["call"], first["calls"]) == (1, 2, 2)
    assert first["label"] == "blocks.0.act (1/2)" and second["label"] == "blocks.0.act (2/2)"
    assert first["source"] == second["source"]  # one module, declared once
    model_py = folder / "model.py"
    assert first["callSource"]["line"] == line_of(model_py, "out = self.act(self.bn1")
    assert second["callSource"]["line"] == line_of(model_py, "return self.act(out + x)")
    after = successors(graph)
    assert "blocks.0.bn1" in {e["source"] for e in graph["connections"] if e["target"] == "blocks.0.act"}
    add = next(n for n in after if n.startswith("add@blocks.0"))
    assert after[add] == {"blocks.0.act#2"}  # the residual sum goes into the second call, not the first
    assert after["blocks.0.act#2"] == {"blocks.1.conv1", "add@blocks.1#0"}  # the block's output
    assert "blocks.1.conv1" not in after["blocks.0.act"]
    assert_acyclic(graph)


def test_sequential_and_module_list_items_point_at_their_own_lines(tmp_path):
    folder = recipe(tmp_path, RESNET)
    nodes = layers(trace_graph(folder, [{"shape": [1, 1, 4, 4]}]))
    model_py = folder / "model.py"
    assert nodes["stem.0"]["source"]["line"] == line_of(model_py, "nn.Conv2d(1, 4, 3, padding=1),")
    assert nodes["stem.1"]["source"]["line"] == line_of(model_py, "nn.ReLU(),")
    assert nodes["stem"]["source"]["line"] == line_of(model_py, "self.stem = nn.Sequential(")
    blocks = line_of(model_py, "self.blocks = nn.ModuleList")
    assert nodes["blocks"]["source"]["line"] == nodes["blocks.1"]["source"]["line"] == blocks


def test_groups_carry_their_class_and_a_list_that_is_never_called_still_holds_its_items(tmp_path):
    nodes = layers(trace_graph(recipe(tmp_path, RESNET), [{"shape": [1, 1, 4, 4]}]))
    assert nodes["blocks.0"]["className"] == "BasicBlock" and nodes["blocks.0"]["kind"] == "module"
    assert nodes["blocks"]["className"] == "ModuleList"
    assert nodes["blocks.0"]["parent"] == nodes["blocks.1"]["parent"] == "blocks"
    assert nodes["stem"]["className"] == "Sequential"


def test_sizes_written_one_by_one_are_one_shape(tmp_path):
    nodes = layers(trace_graph(recipe(tmp_path, RESNET), [{"shape": [1, 1, 4, 4]}]))
    view = next(n for n in nodes.values() if n["id"].startswith("view@"))
    assert view["params"] == {"shape": [1, 4, 16]}
    assert next(n for n in nodes.values() if n["id"].startswith("mean@"))["params"] == {"dim": -1}


def test_a_shared_embedding_over_two_inputs_keeps_the_streams_apart(tmp_path):
    graph = trace_graph(recipe(tmp_path, SEQ2SEQ), [
        {"name": "src", "values": [[1, 2, 3]], "dtype": "int64"},
        {"name": "tgt", "shape": [1, 2], "dtype": "int64", "fill": "arange"},
    ])
    nodes = layers(graph)
    assert nodes["input:src"]["params"] == {"shape": "1,3", "dtype": "torch.int64"}
    assert nodes["input:tgt"]["params"] == {"shape": "1,2", "dtype": "torch.int64"}
    assert nodes["input:src"]["label"] == "src"
    assert {e["target"] for e in graph["connections"] if e["source"] == "input:src"} == {"embed"}
    assert {e["target"] for e in graph["connections"] if e["source"] == "input:tgt"} == {"embed#2"}
    assert "decoder" not in reachable(graph, "input:src") - reachable(graph, "encoder")
    assert "decoder" not in reachable(graph, "embed")  # the source's lookup never reaches the decoder
    assert "decoder" in reachable(graph, "embed#2")
    assert nodes["embed"]["sharedParams"] == {"weight": ["out.weight"]}
    assert nodes["out"]["sharedParams"] == {"weight": ["embed.weight"]}
    assert_acyclic(graph)


def test_indexing_is_shown_as_indexing(tmp_path):
    graph = trace_graph(recipe(tmp_path, SEQ2SEQ), [{"shape": [1, 3], "dtype": "int64"},
                                                     {"shape": [1, 2], "dtype": "int64"}])
    index = next(n for n in graph["layers"] if n["id"].startswith("index@"))
    assert index["op"] == "indexing" and index["params"] == {"index": "[:, :, 0:1]"}
    assert not any("getitem" in n["op"] for n in graph["layers"])


def test_positional_inputs_are_named_after_forwards_parameters(tmp_path):
    graph = trace_graph(recipe(tmp_path, SEQ2SEQ), [{"shape": [1, 3], "dtype": "int64"},
                                                     {"shape": [1, 2], "dtype": "int64"}])
    assert [n["id"] for n in graph["layers"] if n["kind"] == "input"] == ["input:src", "input:tgt"]


def test_an_rnn_step_loop_unrolls_into_one_node_per_step(tmp_path):
    graph = trace_graph(recipe(tmp_path, RNN), [{"shape": [1, 4, 3]}])
    nodes = layers(graph)
    steps = ["cell", "cell#2", "cell#3", "cell#4"]
    assert all(nodes[s]["module"] == "cell" for s in steps)
    for a, b in zip(steps, steps[1:], strict=False):
        assert b in successors(graph)[a]
    assert_acyclic(graph)


@pytest.mark.parametrize(("inputs", "message"), [
    ([{"shape": [1, 3], "dtype": "int64"}, {"name": "nope", "shape": [1, 2], "dtype": "int64"}],
     "do not fit forward(src, tgt, scale)"),
    ([{"shape": [1, 3], "dtype": "int128"}], "dtype 'int128' is not a torch dtype"),
    ([{"values": [[1, 2], [3]], "dtype": "int64"}], "not a rectangular array"),
    ([{"values": [[1, 2]], "shape": [1, 3], "dtype": "int64"}], "values have shape [1, 2], not the declared"),
    ([{"shape": [1, 3], "fill": "random"}], "fill 'random' is not one of ones, zeros, arange"),
    ([{"name": "src", "shape": [1, 3]}, {"shape": [1, 2]}], "a positional input follows a named one"),
    ([{"shape": [1, 3], "colour": "red"}], "unknown key 'colour'"),
])
def test_bad_inputs_are_refused_with_a_reason(tmp_path, inputs, message):
    with pytest.raises(ValueError, match="recording.inputs") as error:
        trace_graph(recipe(tmp_path, SEQ2SEQ), inputs)
    assert message in str(error.value)


@pytest.mark.parametrize("slug", sorted(f.name for f in (PROJECT_ROOT / "manifests").iterdir()))
def test_every_stored_graph_is_acyclic(slug):
    assert_acyclic(json.loads((PROJECT_ROOT / "manifests" / slug / "manifest.json").read_text()))


SHAPES_AND_WEIGHTS = '''
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Linear(4, 4, bias=False)
        self.bias = nn.Parameter(torch.ones(4))
        self.side = nn.Linear(4, 4)

    def forward(self, x):
        y = self.conv1(x) + self.bias  # the parameter used in an op of this module's own forward
        z = self.side(x)
        return y.view_as(z) + z.new_zeros(z.shape)  # z gives a shape there, no data


def build_model():
    torch.manual_seed(0)
    return Scaled().eval()


def example_inputs():
    return torch.ones(2, 4)
'''


def test_a_shape_taken_from_a_tensor_is_no_edge_and_a_parameter_used_in_an_op_is_named(tmp_path):
    graph = trace_graph(recipe(tmp_path, SHAPES_AND_WEIGHTS), None)
    found = layers(graph)
    add = next(layer for layer in found.values() if layer["id"].startswith("add@") and "weights" in layer["params"])
    assert add["params"]["weights"] == ["bias"]
    view = found["view_as@Scaled#0"]
    assert view["params"]["shape_of"] == ["side"]
    edges = {(e["source"], e["target"]) for e in graph["connections"]}
    assert ("side", "view_as@Scaled#0") not in edges and ("side", "new_zeros@Scaled#0") not in edges
    assert found["new_zeros@Scaled#0"]["params"]["shape_of"] == ["side"]
    assert graph["inputs"] == [{"shape": [2, 4], "dtype": "float32", "madeBy": "example_inputs()"}]
