"""An LSTM written gate by gate (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000)
that reads a string of brackets one token at a time and says, after each, how deeply nested it is. The
trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
SNAPSHOTS = Path(__file__).with_name("snapshots.safetensors")  # the weights during training, by train.py
TOKENS = ("(", ")")  # token 0 opens a bracket, token 1 closes one


@dataclass
class LSTMConfig:
    vocab: int = len(TOKENS)
    features: int = 4  # the size of each token's embedding x_t
    hidden: int = 8  # the size of the cell state c_t and the hidden state h_t
    depths: int = 9  # the nesting depths told apart: 0 to 8


class Gate(nn.Module):
    """One gate: activation(W x_t + U h_{t-1} + b), with W and its bias reading the token and U the state."""

    def __init__(self, features: int, hidden: int, activation: nn.Module) -> None:
        super().__init__()
        self.W = nn.Linear(features, hidden)
        self.U = nn.Linear(hidden, hidden, bias=False)
        self.act = activation

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        return self.act(self.W(x) + self.U(h))  # (B, hidden)


class LSTMCell(nn.Module):
    """One time step. The gates decide, unit by unit, how much of the old cell state to keep (f), how much of
    the candidate to write (i) and how much of the cell to show (o):
        c_t = f_t * c_{t-1} + i_t * g_t        h_t = o_t * tanh(c_t)"""

    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        self.input_gate = Gate(features, hidden, nn.Sigmoid())  # i_t
        self.forget_gate = Gate(features, hidden, nn.Sigmoid())  # f_t (Gers et al. 2000)
        self.candidate = Gate(features, hidden, nn.Tanh())  # g_t, what may be written
        self.output_gate = Gate(features, hidden, nn.Sigmoid())  # o_t

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        i, f = self.input_gate(x, h), self.forget_gate(x, h)
        g, o = self.candidate(x, h), self.output_gate(x, h)
        c = f * c + i * g  # (B, hidden): the memory, carried from step to step
        h = o * torch.tanh(c)  # (B, hidden): what the step shows the head and the next step
        return h, c


class BracketLSTM(nn.Module):
    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.features)
        self.cell = LSTMCell(config.features, config.hidden)
        self.head = nn.Linear(config.hidden, config.depths)

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens (B, T) -> logits (B, T, depths): after each token, a score for every depth."""
        x = self.embed(tokens)  # (B, T, features)
        h = c = x.new_zeros(tokens.size(0), self.config.hidden)  # (B, hidden): nothing read yet
        outputs = []
        for t in range(tokens.size(1)):  # the same cell at every step: the graph shows one call per step
            h, c = self.cell(x[:, t], h, c)
            outputs.append(h)
        return self.head(torch.stack(outputs, 1))  # (B, T, depths)


def depths_of(tokens: list[int]) -> list[int]:
    """The nesting depth after each token: what the network is trained to say."""
    depth, out = 0, []
    for token in tokens:
        depth += 1 if token == 0 else -1
        out.append(depth)
    return out


def build_model(config: LSTMConfig | None = None, weights: Path = WEIGHTS) -> BracketLSTM:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = BracketLSTM(config or LSTMConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
