"""What-if runs, BERT's full corruption sampler, and a stage-by-stage trace of one token.

    python lab.py trace 1,4,3,2,6,2 --position 2          # follow one token through the model
    python lab.py corrupt 1,4,5,2,6,2 --seed 7            # sample BERT's 15% / 80-10-10 corruption

Needs only torch, model.py and run.py beside this file.
"""

import argparse
import json
import sys

import torch
from torch import Tensor

try:
    from .model import CLS, MASK, SEP, VOCAB, build_model
    from .run import CaseInputs, run_case
except ImportError:  # run as a script: python lab.py
    from model import CLS, MASK, SEP, VOCAB, build_model
    from run import CaseInputs, run_case

SELECT_RATE = 0.15  # share of the sequence selected for prediction
MASK_RATE, RANDOM_RATE = 0.8, 0.1  # of the selected: replaced by MASK, by a random token; the rest kept


def live_run(input_ids: list[int], segment_ids: list[int], mlm_positions: list[int], original_ids: list[int],
             nsp_label: int, attention: str) -> dict:
    """A what-if case on the recorded weights, in the manifest's case shape."""
    case = CaseInputs(input_ids, original_ids, segment_ids, sorted(mlm_positions), nsp_label)
    return run_case(build_model(), case, causal=attention == "causal")


def sample_corruption(input_ids: list[int], seed: int, segment_ids: list[int]) -> dict:
    """BERT's masking, as in its create_pretraining_data: choose round(15%) of the positions (at least one,
    never CLS or SEP) in a random order, then replace 80% of them with MASK, 10% with a random token of
    the whole vocabulary, and keep 10% unchanged. The same seed gives the same draw. With the draw comes
    the what-if run request that scores it."""
    generator = torch.Generator().manual_seed(seed)
    candidates = [i for i, token in enumerate(input_ids) if token not in (CLS, SEP)]
    count = min(len(candidates), max(1, round(len(input_ids) * SELECT_RATE)))
    order = torch.randperm(len(candidates), generator=generator)[:count].tolist()
    selected = sorted(candidates[i] for i in order)
    positions = []
    for i, token in enumerate(input_ids):
        entry = {"position": i, "original": token, "selected": i in selected, "action": None, "token": token}
        if i in selected:
            draw = torch.rand((), generator=generator).item()
            if draw < MASK_RATE:
                entry |= {"action": "mask", "token": MASK}
            elif draw < MASK_RATE + RANDOM_RATE:
                entry |= {"action": "random", "token": int(torch.randint(VOCAB, (), generator=generator))}
            else:
                entry["action"] = "unchanged"
        positions.append(entry)
    corrupted = [p["token"] for p in positions]
    run_request = {"input_ids": corrupted, "segment_ids": list(segment_ids),
                   "mlm_positions": selected, "original_ids": list(input_ids), "nsp_label": 0,
                   "attention": "bidirectional"}
    return {"seed": seed, "positions": positions, "input_ids": corrupted, "original_ids": list(input_ids),
            "mlm_positions": selected, "run_request": run_request}


CAPTIONS = {
    "tokens": "The sequence as token ids; the traced position is the one we follow.",
    "embeddings": "Three learned vectors are looked up and added: the token's word embedding, its position's "
                  "embedding and its segment's (A or B) embedding.",
    "embedding_norm": "LayerNorm rescales the sum to zero mean and unit variance, then applies a learned "
                      "scale and shift.",
    "attention": "Each head compares this token's query with every position's key; softmax turns the scaled "
                 "scores into weights that sum to one, and the output mixes the positions' values by them.",
    "attention_output": "The heads' outputs are concatenated and projected back to the width; the residual "
                        "connection adds the input, and LayerNorm normalises the sum (post-LN).",
    "ffn_up": "The feed-forward network widens the vector to 32 values and applies GELU, which passes "
              "positive values nearly unchanged and squeezes negative ones towards zero.",
    "ffn_down": "A second linear layer brings the 32 values back to 8; residual plus LayerNorm again gives "
                "the encoder's output for this token.",
    "mlm_head": "The MLM head transforms the vector (linear, GELU, LayerNorm) before decoding it.",
    "logits": "Each vocabulary entry's logit is the dot product of the vector with that token's row of the "
              "word-embedding matrix (the decoder weight is tied to it) plus the decoder's bias.",
    "softmax": "Softmax exponentiates the logits and divides by their sum, giving probabilities that add "
               "up to one.",
    "nsp": "For the sentence pair, the CLS position's output goes through the tanh pooler and a two-way "
           "head: IsNext or NotNext.",
}


def _capture(model) -> tuple[dict[str, Tensor], list]:
    """Forward hooks recording what each module received and returned during the real forward pass."""
    seen: dict[str, Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        handles.append(module.register_forward_pre_hook(
            lambda _m, args, name=name: seen.__setitem__(f"{name}:in", args[0].detach())))
        handles.append(module.register_forward_hook(
            lambda _m, _args, out, name=name: seen.__setitem__(name, out.detach())))
    return seen, handles


@torch.no_grad()
def trace(input_ids: list[int], segment_ids: list[int], position: int, attention: str) -> dict:
    """Follow one token through every stage of the model, with the numbers captured at each (the server's
    lab kind chooses the position when a request names none: the first MASK)."""
    model = build_model()
    seen, handles = _capture(model)
    try:
        model(torch.tensor([input_ids]), torch.tensor([segment_ids]), causal=attention == "causal")
    finally:
        for handle in handles:
            handle.remove()

    def at(name: str, pos: int = position) -> list[float]:
        return seen[name][0, pos].tolist()

    heads_q = seen["encoder.attention.query"][0].unflatten(-1, (2, -1))  # (T, heads, head_dim)
    heads_k = seen["encoder.attention.key"][0].unflatten(-1, (2, -1))
    scores = seen["encoder.attention.softmax:in"][0, :, position]  # (heads, T)
    weights = seen["encoder.attention.softmax"][0, :, position]  # (heads, T)
    heads = []
    for h in range(weights.size(0)):
        others = [j for j in weights[h].argsort(descending=True).tolist() if j != position]
        heads.append({
            "head": h,
            "query": heads_q[position, h].tolist(),
            "keys": heads_k[:, h].tolist(),
            # With causal attention the keys after the position score minus infinity, which JSON cannot
            # carry: they are None, and the masked keys are named.
            "scores": [v if v != float("-inf") else None for v in scores[h].tolist()],
            "masked": [j for j, v in enumerate(scores[h].tolist()) if v == float("-inf")],
            "weights": weights[h].tolist(),
            "top_context": [{"position": j, "token": input_ids[j], "weight": weights[h, j].item()}
                            for j in others[:2]],
        })
    up, gelu = at("encoder.up"), at("encoder.gelu")

    hidden = seen["mlm_decoder:in"][0, position]  # (WIDTH,) what the decoder reads
    logits = seen["mlm_decoder"][0, position]  # (VOCAB,) what it returned
    table = [{"token": v, "dot": (hidden @ model.word_embeddings.weight[v]).item(),
              "bias": model.mlm_decoder.bias[v].item(), "logit": logits[v].item()} for v in range(logits.numel())]
    table.sort(key=lambda row: row["logit"], reverse=True)
    exps = logits.double().exp()
    probs = seen["mlm_decoder"][0, position].softmax(-1)  # the run's own softmax of the captured logits
    softmax = [{"token": row["token"], "logit": row["logit"], "exp": exps[row["token"]].item(),
                "probability": probs[row["token"]].item()} for row in table]
    nsp_logits = seen["nsp_head"][0]
    nsp_probs = nsp_logits.softmax(-1)

    stages = [
        {"id": "tokens", "values": list(input_ids), "token": input_ids[position], "position": position},
        {"id": "embeddings", "word": at("word_embeddings"),
         "position_embedding": seen["position_embeddings"][position].tolist(),  # (T, WIDTH): no batch axis
         "segment": at("segment_embeddings"), "values": at("embedding_norm:in")},
        {"id": "embedding_norm", "input": at("embedding_norm:in"), "values": at("embedding_norm")},
        {"id": "attention", "heads": heads, "mask": attention},
        {"id": "attention_output", "projected": at("encoder.attention.project"),
         "residual_sum": at("encoder.attention_norm:in"), "values": at("encoder.attention_norm")},
        {"id": "ffn_up", "before_gelu": up, "after_gelu": gelu,
         "passed": [i for i, x in enumerate(up) if x > 0], "suppressed": [i for i, x in enumerate(up) if x <= 0],
         "values": gelu},
        {"id": "ffn_down", "down": at("encoder.down"), "residual_sum": at("encoder.output_norm:in"),
         "values": at("encoder.output_norm")},
        {"id": "mlm_head", "transform": at("mlm_transform"), "gelu": at("mlm_gelu"), "values": at("mlm_norm")},
        {"id": "logits", "table": table, "values": logits.tolist()},
        {"id": "softmax", "table": softmax, "sum_exp": exps.sum().item(), "values": probs.tolist(),
         "predicted": table[0]["token"], "confidence": probs.max().item()},
        {"id": "nsp", "cls": at("encoder.output_norm", 0),
         "pooler": seen["pooler"][0].tolist(), "tanh": seen["pooler_tanh"][0].tolist(),  # (B, WIDTH): CLS only
         "logits": nsp_logits.tolist(), "values": nsp_probs.tolist(),
         "predicted": ["IsNext", "NotNext"][int(nsp_probs.argmax())]},
    ]
    for stage in stages:
        stage["caption"] = CAPTIONS[stage["id"]]
    return {"input_ids": list(input_ids), "segment_ids": list(segment_ids), "position": position,
            "attention": attention, "stages": stages}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace")
    t.add_argument("input_ids")
    t.add_argument("--segments", default="0,0,0,0,1,1")
    t.add_argument("--position", type=int, required=True)
    t.add_argument("--causal", action="store_true")
    c = sub.add_parser("corrupt")
    c.add_argument("input_ids")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--segments", default="0,0,0,0,1,1")
    args = parser.parse_args(argv)
    ids = [int(x) for x in args.input_ids.split(",")]
    segments = [int(x) for x in args.segments.split(",")]
    if args.command == "corrupt":
        print(json.dumps(sample_corruption(ids, args.seed, segments), indent=2))
        return 0
    result = trace(ids, segments, args.position, "causal" if args.causal else "bidirectional")
    for stage in result["stages"]:
        print(f"== {stage['id']}: {stage['caption']}")
        if stage["id"] == "softmax":
            for row in stage["table"][:5]:
                print(f"   token {row['token']:2}  logit {row['logit']:8.4f}  exp {row['exp']:10.4f}  "
                      f"p {row['probability']:.4f}")
            print(f"   sum of exp {stage['sum_exp']:.4f}; predicted token {stage['predicted']}")
        elif "values" in stage:
            print("   " + " ".join(f"{v:.4g}" for v in stage["values"][:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
