"""A selective state-space model, Mamba (Gu & Dao, 2023), written op by op, and the LSTM it is set beside, for the
selective copying task (task.py). The trained weights live beside this file in weights.safetensors (Mamba) and
lstm.safetensors (`python train.py`).

Each Mamba block mixes the sequence through a linear recurrence h_t = Ā_t h_{t-1} + B̄_t x_t, y_t = C_t h_t + D x_t
whose step size Δ_t, B_t and C_t are computed from the token itself: the selection that lets it keep a token and
skip a blank, which a time-invariant state-space model (S4) cannot do.
"""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

from .task import VOCAB, example

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # Mamba, written by train.py
LSTM_WEIGHTS = Path(__file__).with_name("lstm.safetensors")  # the LSTM on the same task, written by train.py


@dataclass
class MambaConfig:
    vocab: int = len(VOCAB)
    d_model: int = 16
    layers: int = 2
    d_state: int = 8  # N: the state each channel keeps
    expand: int = 2  # d_inner = expand * d_model channels inside a block
    d_conv: int = 4  # the causal convolution's width
    dt_rank: int = 2  # Δ is computed through this many numbers per token (the paper: ceil(d_model / 16))
    dt_min: float = 1e-3  # the range the initial step sizes are drawn from (the paper's)
    dt_max: float = 1e-1

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model


class SelectiveScan(nn.Module):
    """The selective scan, h_t = Ā_t h_{t-1} + B̄_t x_t and y_t = C_t h_t + D x_t, with Ā_t = exp(Δ_t A) and
    B̄_t x_t = Δ_t B_t x_t (zero-order hold for A, Euler for B, as the paper's code). Every h_t at once by a parallel
    scan (Hillis & Steele): combining steps (a, b) then (a', b') gives (a' a, a' b + b'), so after the rounds at
    distances 1, 2, 4, ... each position holds the whole recurrence up to it in log2(T) rounds instead of T steps.
    The recurrence run step by step is run.py's check."""

    def forward(self, x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor) -> Tensor:
        h = self.states(x, delta, A, B)  # (B, T, d_inner, N)
        return torch.einsum("btdn,btn->btd", h, C) + D * x  # (B, T, d_inner)

    def states(self, x: Tensor, delta: Tensor, A: Tensor, B: Tensor) -> Tensor:
        """h_t for every t, (B, T, d_inner, N), from h_0 = 0."""
        a = torch.exp(delta[..., None] * A)  # (B, T, d_inner, N): Ā_t, how much of the state each step keeps
        b = delta[..., None] * B[:, :, None, :] * x[..., None]  # (B, T, d_inner, N): B̄_t x_t, what it writes
        steps, distance = x.size(1), 1
        while distance < steps:  # (a, b) at t now combines t - 2·distance + 1 .. t; before t = 0, the identity (1, 0)
            earlier_b = nn.functional.pad(b[:, :-distance], (0, 0, 0, 0, distance, 0), value=0.0)
            earlier_a = nn.functional.pad(a[:, :-distance], (0, 0, 0, 0, distance, 0), value=1.0)
            b = a * earlier_b + b
            a = a * earlier_a
            distance *= 2
        return b


class MambaMixer(nn.Module):
    """One Mamba block's mixer (the paper's Figure 3): the input split into a path x and a gate z; x through a
    causal depthwise convolution and SiLU, then the selective scan with Δ, B, C computed from x; the result gated by
    SiLU(z) and projected back."""

    def __init__(self, config: MambaConfig) -> None:
        super().__init__()
        d_inner, n = config.d_inner, config.d_state
        self.dt_rank, self.d_state = config.dt_rank, n
        self.in_proj = nn.Linear(config.d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, config.d_conv, groups=d_inner, padding=config.d_conv - 1)
        self.act = nn.SiLU()
        self.x_proj = nn.Linear(d_inner, config.dt_rank + 2 * n, bias=False)  # x -> (Δ's low rank, B, C)
        self.dt_proj = nn.Linear(config.dt_rank, d_inner)
        self.softplus = nn.Softplus()
        # S4D-real: A = -(1, 2, ..., N) in every channel, learnt as log(-A) so that A stays negative (a decay)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))  # the skip connection past the state
        self.scan = SelectiveScan()
        self.gate = nn.SiLU()
        self.out_proj = nn.Linear(d_inner, config.d_model, bias=False)
        with torch.no_grad():  # the paper's Δ initialisation: softplus(bias) spread log-uniformly in [dt_min, dt_max]
            dt = torch.exp(
                torch.rand(d_inner) * (torch.log(torch.tensor(config.dt_max)) - torch.log(torch.tensor(config.dt_min)))
                + torch.log(torch.tensor(config.dt_min))
            )
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # the inverse of softplus

    def forward(self, u: Tensor) -> Tensor:
        steps = u.size(1)
        x, z = self.in_proj(u).chunk(2, dim=-1)  # (B, T, d_inner) each
        x = self.act(self.conv1d(x.transpose(1, 2))[..., :steps].transpose(1, 2))  # causal: the first T outputs
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)  # (B, T, r), (B, T, N) x2
        delta = self.softplus(self.dt_proj(dt))  # (B, T, d_inner): each channel's step size at each token
        A = -torch.exp(self.A_log)  # (d_inner, N)
        y = self.scan(x, delta, A, B, C, self.D)  # (B, T, d_inner)
        return self.out_proj(y * self.gate(z))  # (B, T, d_model)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaLayer(nn.Module):
    """A residual block: x + mixer(RMSNorm(x))."""

    def __init__(self, config: MambaConfig) -> None:
        super().__init__()
        self.norm = RMSNorm(config.d_model)
        self.mixer = MambaMixer(config)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.mixer(self.norm(x))


class Mamba(nn.Module):
    """Token ids (B, T) -> logits over the vocabulary at every position (B, T, vocab)."""

    def __init__(self, config: MambaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.d_model)
        self.layers = nn.ModuleList([MambaLayer(config) for _ in range(config.layers)])
        self.norm_f = RMSNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)  # (B, T, d_model)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm_f(x))  # (B, T, vocab)


@dataclass
class LSTMConfig:
    vocab: int = len(VOCAB)
    d_model: int = 16
    hidden: int = 32  # about as many weights as the Mamba's (train.py prints both counts)


class LSTMBaseline(nn.Module):
    """The same task for an LSTM (Hochreiter & Schmidhuber, 1997): its gates decide, token by token, what its cell
    keeps; token ids (B, T) -> logits (B, T, vocab)."""

    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.d_model)
        self.lstm = nn.LSTM(config.d_model, config.hidden, batch_first=True)
        self.head = nn.Linear(config.hidden, config.vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        out, _ = self.lstm(self.embed(tokens))  # (B, T, hidden)
        return self.head(out)


def build_model(config: MambaConfig | None = None, weights: Path = WEIGHTS) -> Mamba:
    """The recorded model: the trained Mamba from weights.safetensors, in eval mode."""
    model = Mamba(config or MambaConfig())
    model.load_state_dict(stored.read(weights)[0])
    return model.eval()


def build_lstm(weights: Path = LSTM_WEIGHTS) -> LSTMBaseline:
    """The LSTM trained on the same task, from lstm.safetensors, in eval mode."""
    model = LSTMBaseline(LSTMConfig())
    model.load_state_dict(stored.read(weights)[0])
    return model.eval()


def example_inputs() -> tuple[Tensor]:
    """What the graph is traced on: the recorded example sequence."""
    return (torch.tensor([example()]),)
