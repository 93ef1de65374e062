"""A graph node's plain name, the words a learner knows beside its module path ("token embedding · wte"): as the
recipe declares it (recipe.toml `[names]`, by node id, a `*` standing for one part of a path: "h.*" names every
block), else by a rule for the common torch modules and tensor ops ("layer norm", "matrix product"). Class and op
names stay in the node's details."""

import fnmatch

# torch's modules and the recorder's op names, as a learner says them (the recorder writes ops as `Tensor.add`,
# `torch.cat`: the part after the dot is what is looked up here too).
BY_OP = {
    "Linear": "linear layer", "Embedding": "embedding", "LayerNorm": "layer norm", "RMSNorm": "RMS norm",
    "GroupNorm": "group norm", "BatchNorm1d": "batch norm", "BatchNorm2d": "batch norm", "Conv1d": "convolution",
    "Conv2d": "convolution", "AvgPool2d": "average pooling", "AdaptiveAvgPool2d": "average pooling",
    "MaxPool2d": "max pooling", "Upsample": "upsampling", "Flatten": "flatten", "Dropout": "dropout",
    "Identity": "pass-through", "Softmax": "softmax", "GELU": "GELU activation", "ReLU": "ReLU activation",
    "SiLU": "SiLU activation", "Sigmoid": "sigmoid", "Softplus": "softplus", "ModuleList": "stack of blocks",
    "Sequential": "sequence of layers",
    "Input": "input", "Output": "output",
    # The classes recipes conventionally give their building blocks (nanoGPT's Block and MLP, a ResBlock), by what
    # they are; a recipe names its own otherwise.
    "Block": "transformer block", "MLP": "feed-forward network", "FeedForward": "feed-forward network",
    "SelfAttention": "self-attention", "CausalSelfAttention": "causal self-attention",
    "MultiHeadAttention": "multi-head attention", "EncoderLayer": "encoder layer", "DecoderLayer": "decoder layer",
    "Encoder": "encoder", "Decoder": "decoder", "Embeddings": "embeddings", "ResBlock": "residual block",
    "BasicBlock": "residual block", "Projection": "projection", "Gate": "gate", "TimeEmbedding": "timestep embedding",
    "GraphConv": "graph convolution", "ConvStage": "convolution stage", "SelectiveScan": "selective scan",
    "SentencePooling": "sentence pooling",
    "zeros": "zeros", "zeros_like": "zeros", "new_zeros": "zeros", "ones": "ones", "float": "to float",
    "Python": "Python code", "Tensor property": "tensor attribute",
    "add": "sum", "mul": "product", "div": "division", "matmul": "matrix product", "masked_fill": "mask",
    "transpose": "transpose", "view": "reshape", "reshape": "reshape", "unflatten": "split into heads",
    "flatten": "flatten", "split": "split", "chunk": "split", "cat": "join", "stack": "stack", "exp": "exponential",
    "triu": "causal mask", "arange": "positions", "neg": "negation", "permute": "reorder",
    "expand": "broadcast", "sin": "sine", "cos": "cosine", "linear": "linear map", "indexing": "pick",
}


def plain_name(layer: dict, declared: dict[str, str]) -> str | None:
    """The node's plain name: the recipe's for its id (an exact name first, then the first pattern that matches),
    else the rule's for its class or op; None where neither knows one (a recipe's own module class)."""
    node = layer["id"]
    if node in declared:
        return declared[node]
    for pattern, name in declared.items():
        if "*" in pattern and fnmatch.fnmatchcase(node, pattern) and node.count(".") == pattern.count("."):
            return name
    kind = layer.get("kind")
    if kind in ("input", "output"):
        return BY_OP[kind.capitalize()]
    op = (layer.get("className") if kind == "module" else None) or layer.get("op", "")
    return BY_OP.get(op) or BY_OP.get(op.rpartition(".")[2])
