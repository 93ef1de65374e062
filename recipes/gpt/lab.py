"""What-if runs, generation step by step, and a stage-by-stage trace of one position.

    python lab.py generate "3 1 4 1 =" --steps 4               # greedy: the sorted digits
    python lab.py generate "3 1 4 1 =" --sample --seed 3 --top-k 5
    python lab.py trace "3 1 4 1 = 1"                          # follow the last position

Needs torch, safetensors, model.py, train.py, run.py and recipe.toml beside this file.
"""

import argparse
import sys

import torch
from torch import Tensor

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import WORDS, encode, run_case

TOP = 5  # tokens listed at each generation step


def live_run(input_ids: list[int]) -> dict:
    """A what-if case on the recorded weights, in the manifest's case shape."""
    return run_case(build_model(), input_ids)


def _top(probs: Tensor, k: int = TOP) -> list[dict]:
    values, ids = probs.topk(min(k, probs.numel()))
    return [{"token": int(i), "word": WORDS[int(i)], "probability": v.item()} for v, i in zip(values, ids, strict=True)]


@torch.no_grad()
def generate(
    input_ids: list[int],
    steps: int = 3,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> dict:
    """Extend the prompt one token at a time. At each step: the model's distribution for the next token,
    the distribution actually drawn from (temperature, then top-k), and the pick."""
    model = build_model()
    generator = torch.Generator().manual_seed(seed)
    ids = list(input_ids)
    record = []
    for _ in range(steps):
        logits = model(torch.tensor([ids]))[0, -1]  # (vocab,) the prediction after the last token
        probs = logits.softmax(-1)
        scaled = logits / temperature
        if top_k is not None and top_k < scaled.numel():
            cutoff = scaled.topk(top_k).values[-1]
            scaled = scaled.masked_fill(scaled < cutoff, float("-inf"))
        drawn = scaled.softmax(-1)
        pick = int(drawn.argmax()) if strategy == "greedy" else int(torch.multinomial(drawn, 1, generator=generator))
        record.append(
            {
                "position": len(ids),
                "context": list(ids),
                "top": _top(probs),
                "drawn_top": _top(drawn),
                "probabilities": probs.tolist(),
                "drawn": drawn.tolist(),
                "pick": pick,
                "word": WORDS[pick],
                "pick_probability": probs[pick].item(),
            }
        )
        ids.append(pick)
    return {
        "prompt": list(input_ids),
        "strategy": strategy,
        "temperature": temperature,
        "top_k": top_k,
        "seed": seed,
        "steps": record,
        "output_ids": ids,
        "text": " ".join(WORDS[t] for t in ids),
    }


def _hooks(model) -> tuple[dict[str, Tensor], list]:
    """Forward hooks recording what each module received and returned during the real forward pass."""
    seen: dict[str, Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            handles.append(
                module.register_forward_pre_hook(
                    lambda _m, args, name=name: seen.__setitem__(f"{name}:in", args[0].detach())
                )
            )
            handles.append(
                module.register_forward_hook(lambda _m, _args, out, name=name: seen.__setitem__(name, out.detach()))
            )
    return seen, handles


def _masked(values: list[float]) -> list[float | None]:
    """Scores the causal mask removed (minus infinity) as None: JSON has no infinity."""
    return [v if v != float("-inf") else None for v in values]


@torch.no_grad()
def trace(input_ids: list[int], position: int) -> dict:
    """Follow one position through every stage of the model, with the numbers captured at each (the
    server's lab kind chooses the position when a request names none: the last token)."""
    model = build_model()
    seen, handles = _hooks(model)
    try:
        model(torch.tensor([input_ids]))
    finally:
        for handle in handles:
            handle.remove()
    n_head = model.config.n_head

    def at(name: str) -> list[float]:
        return seen[name][0, position].tolist()

    stages = [
        {
            "id": "tokens",
            "values": list(input_ids),
            "words": [WORDS[t] for t in input_ids],
            "position": position,
            "token": input_ids[position],
        },
        {
            "id": "embeddings",
            "token_embedding": at("wte"),
            "position_embedding": seen["wpe"][position].tolist(),
            "values": seen["h.0:in"][0, position].tolist(),
        },
    ]
    for b in range(len(model.h)):
        scores = seen[f"h.{b}.attn.softmax:in"][0, :, position]  # (heads, T), -inf right of the position
        weights = seen[f"h.{b}.attn.softmax"][0, :, position]  # (heads, T)
        heads = []
        for h in range(n_head):
            order = [j for j in weights[h].argsort(descending=True).tolist() if j != position and j <= position]
            heads.append(
                {
                    "head": h,
                    "scores": _masked(scores[h].tolist()),
                    "weights": weights[h].tolist(),
                    "top_context": [
                        {"position": j, "token": input_ids[j], "weight": weights[h, j].item()} for j in order[:2]
                    ],
                }
            )
        up = at(f"h.{b}.mlp.c_fc")
        stages.append(
            {
                "id": f"block{b}",
                "block": b,
                "input": at(f"h.{b}.ln_1:in"),
                "ln_1": at(f"h.{b}.ln_1"),
                "heads": heads,
                "masked_after": position,
                "attention_output": at(f"h.{b}.attn"),
                "after_attention": at(f"h.{b}.ln_2:in"),
                "ln_2": at(f"h.{b}.ln_2"),
                "before_gelu": up,
                "after_gelu": at(f"h.{b}.mlp.gelu"),
                "passed": [i for i, x in enumerate(up) if x > 0],
                "squeezed": [i for i, x in enumerate(up) if x <= 0],
                "mlp_output": at(f"h.{b}.mlp"),
                "values": (seen[f"h.{b}.ln_2:in"][0, position] + seen[f"h.{b}.mlp"][0, position]).tolist(),
            }
        )
    hidden = seen["ln_f"][0, position]  # (C,) what the head reads
    logits = seen["lm_head"][0, position]  # (vocab,)
    probs = logits.softmax(-1)
    shift = logits.max()
    exps = (logits.double() - shift.double()).exp()
    rows = (
        {
            "token": v,
            "word": WORDS[v],
            "dot": (hidden @ model.wte.weight[v]).item(),
            "logit": logits[v].item(),
            "exp": exps[v].item(),
            "probability": probs[v].item(),
        }
        for v in range(logits.numel())
    )
    table = sorted(rows, key=lambda row: row["logit"], reverse=True)
    stages += [
        {"id": "final_norm", "input": at("ln_f:in"), "values": hidden.tolist()},
        {
            "id": "logits",
            "table": table,
            "values": logits.tolist(),
            "max_shift": shift.item(),
            "sum_exp": exps.sum().item(),
        },
        {
            "id": "prediction",
            "token": table[0]["token"],
            "word": table[0]["word"],
            "probability": table[0]["probability"],
            "actual_next": input_ids[position + 1] if position + 1 < len(input_ids) else None,
        },
    ]
    return {"input_ids": list(input_ids), "position": position, "stages": stages}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("prompt")
    g.add_argument("--steps", type=int, default=4)
    g.add_argument("--sample", action="store_true")
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-k", type=int)
    g.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("trace")
    t.add_argument("prompt")
    t.add_argument("--position", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "generate":
        result = generate(
            encode(args.prompt),
            args.steps,
            "sample" if args.sample else "greedy",
            args.temperature,
            args.top_k,
            args.seed,
        )
        for step in result["steps"]:
            tops = ", ".join(f"{t['word']} {t['probability']:.3f}" for t in step["drawn_top"])
            print(f"step at position {step['position']}: {tops} -> {step['word']!r}")
        print(result["text"])
        return 0
    result = trace(encode(args.prompt), args.position)
    prediction = result["stages"][-1]
    print(f"position {result['position']} predicts {prediction['word']!r} ({prediction['probability']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
