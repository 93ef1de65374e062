"""A BERT-layout masked language model's replay and lab, written once for every such recipe: one forward scored
(masked-token and sentence-pair cross entropy), a case in the masked-LM lab's shape, BERT's corruption sampler,
and one token followed through every stage.

The recipe's model names its modules as BERT does (`word_embeddings`, `position_embeddings`,
`segment_embeddings`, `embedding_norm`, one `encoder` layer with `attention.{query,key,value,softmax,project}`,
`attention_norm`, `up`, `gelu`, `down`, `output_norm`; then `mlm_transform`, `mlm_gelu`, `mlm_norm`,
`mlm_decoder`, `pooler`, `pooler_tanh`, `nsp_head`), is called as `model(input_ids, segment_ids, causal=…)` and
answers the MLM logits flattened, then the two NSP logits: (B, T * VOCAB + 2).
"""

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .items import matrix, metric, vector

SELECT_RATE = 0.15  # share of the sequence selected for prediction
MASK_RATE, RANDOM_RATE = 0.8, 0.1  # of the selected: replaced by MASK, by a random token; the rest kept


# What a trace says at the stages every such model computes alike; a recipe adds those that name its sizes or
# its words: `captions=CAPTIONS | {...}`.
CAPTIONS = {
    "embedding_norm": "LayerNorm rescales the sum to zero mean and unit variance, then applies a learned "
    "scale and shift.",
    "attention_output": "The heads' outputs are concatenated and projected back to the width; the residual "
    "connection adds the input, and LayerNorm normalises the sum (post-LN).",
    "mlm_head": "The MLM head transforms the vector (linear, GELU, LayerNorm) before decoding it.",
    "softmax": "Softmax exponentiates the logits and divides by their sum, giving probabilities that add up to one.",
}


@dataclass(frozen=True)
class CaseInputs:
    input_ids: list[int]  # what the model reads: the corrupted sequence
    original_ids: list[int]  # what the selected positions are scored against
    segment_ids: list[int]
    selected: list[int]  # positions scored by the MLM loss
    nsp_label: int  # 0 IsNext, 1 NotNext


def unpack(output: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """Split a packed (B, T * VOCAB + 2) output into MLM logits (B, T, VOCAB) and NSP logits (B, 2)."""
    return output[:, :-2].unflatten(1, (length, -1)), output[:, -2:]


def mlm_loss(mlm_logits: Tensor, original_ids: Tensor, selected: Tensor) -> Tensor:
    """Masked-token cross entropy: mean over the selected positions only, against the original ids."""
    return nn.functional.cross_entropy(mlm_logits[selected], original_ids[selected])


@dataclass
class Forward:
    """One forward pass with everything a case reports."""

    mlm_logits: Tensor  # (T, VOCAB)
    nsp_logits: Tensor  # (2,)
    attention: Tensor  # (heads, T, T)
    mlm_loss: Tensor
    nsp_loss: Tensor


def forward(
    model: nn.Module,
    input_ids: list[int],
    segment_ids: list[int],
    original_ids: list[int],
    selected: list[int],
    nsp_label: int,
    causal: bool = False,
) -> Forward:
    """Run the model once and score it; the attention weights are read by a hook on the softmax."""
    captured: list[Tensor] = []
    hook = model.encoder.attention.softmax.register_forward_hook(lambda _module, _args, out: captured.append(out))
    try:
        output = model(torch.tensor([input_ids]), torch.tensor([segment_ids]), causal=causal)
    finally:
        hook.remove()
    mlm_logits, nsp_logits = unpack(output, len(input_ids))  # (1, T, VOCAB), (1, 2)
    mask = torch.zeros(len(input_ids), dtype=torch.bool)
    mask[selected] = True
    return Forward(
        mlm_logits=mlm_logits[0],
        nsp_logits=nsp_logits[0],
        attention=captured[0][0],
        mlm_loss=mlm_loss(mlm_logits[0], torch.tensor(original_ids), mask),
        nsp_loss=nn.functional.cross_entropy(nsp_logits, torch.tensor([nsp_label])),
    )


@torch.no_grad()
def run_case(model: nn.Module, case: CaseInputs, causal: bool = False) -> dict:
    """A case in the manifest's shape (matrices, vectors, metrics; each with a stable key and a display
    label) with more: attention for every head, probabilities at every position and at each selected one."""
    f = forward(
        model, case.input_ids, case.segment_ids, case.original_ids, case.selected, case.nsp_label, causal=causal
    )
    probs = f.mlm_logits.softmax(-1)  # (T, VOCAB)
    mode = "Causal" if causal else "Bidirectional"
    heads = [
        matrix(f"attention_head_{h}", f"{mode} attention · head {h}", f.attention[h])
        for h in range(f.attention.size(0))
    ]
    per_position = [
        vector(f"probabilities_at_{p}", f"Prediction at position {p} · {probs.size(1)} token probabilities", probs[p])
        for p in sorted(case.selected)
    ]
    return {
        "label": f"Live run · {mode.lower()} attention",
        "matrices": [*heads, matrix("probabilities", "Token probabilities at every position", probs.tolist())],
        "vectors": [
            vector("original_ids", "Original token IDs", list(case.original_ids)),
            vector("input_ids", "Corrupted token IDs", list(case.input_ids)),
            vector(
                "mlm_positions",
                "MLM loss positions · 1 means selected",
                [int(i in case.selected) for i in range(len(case.input_ids))],
            ),
            vector(
                "first_mask_probabilities",
                f"Prediction at first masked position · {probs.size(1)} token probabilities",
                probs[min(case.selected)].tolist(),
            ),
            *per_position,
            vector(
                "nsp_probabilities", "Sentence pair · IsNext / NotNext probabilities", f.nsp_logits.softmax(-1).tolist()
            ),
        ],
        "metrics": [
            metric("mlm_loss", "Masked-token cross entropy", f.mlm_loss.item()),
            metric("nsp_loss", "Sentence-pair cross entropy", f.nsp_loss.item()),
            metric("total_loss", "Combined pretraining objective", (f.mlm_loss + f.nsp_loss).item()),
        ],
    }


def sample_corruption(
    input_ids: list[int], seed: int, segment_ids: list[int], *, vocab: int, mask: int, special: tuple[int, ...]
) -> dict:
    """BERT's masking, as in its create_pretraining_data: choose round(15%) of the positions (at least one,
    never a `special` token such as CLS or SEP) in a random order, then replace 80% of them with `mask`, 10% with
    a random token of the whole vocabulary, and keep 10% unchanged. The same seed gives the same draw. With the
    draw comes the what-if run request that scores it."""
    generator = torch.Generator().manual_seed(seed)
    candidates = [i for i, token in enumerate(input_ids) if token not in special]
    count = min(len(candidates), max(1, round(len(input_ids) * SELECT_RATE)))
    order = torch.randperm(len(candidates), generator=generator)[:count].tolist()
    selected = sorted(candidates[i] for i in order)
    positions = []
    for i, token in enumerate(input_ids):
        entry = {"position": i, "original": token, "selected": i in selected, "action": None, "token": token}
        if i in selected:
            draw = torch.rand((), generator=generator).item()
            if draw < MASK_RATE:
                entry |= {"action": "mask", "token": mask}
            elif draw < MASK_RATE + RANDOM_RATE:
                entry |= {"action": "random", "token": int(torch.randint(vocab, (), generator=generator))}
            else:
                entry["action"] = "unchanged"
        positions.append(entry)
    corrupted = [p["token"] for p in positions]
    run_request = {
        "input_ids": corrupted,
        "segment_ids": list(segment_ids),
        "mlm_positions": selected,
        "original_ids": list(input_ids),
        "nsp_label": 0,
        "attention": "bidirectional",
    }
    return {
        "seed": seed,
        "positions": positions,
        "input_ids": corrupted,
        "original_ids": list(input_ids),
        "mlm_positions": selected,
        "run_request": run_request,
    }


def _capture(model: nn.Module) -> tuple[dict[str, Tensor], list]:
    """Forward hooks recording what each module received and returned during the real forward pass."""
    seen: dict[str, Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        handles.append(
            module.register_forward_pre_hook(
                lambda _m, args, name=name: seen.__setitem__(f"{name}:in", args[0].detach())
            )
        )
        handles.append(
            module.register_forward_hook(lambda _m, _args, out, name=name: seen.__setitem__(name, out.detach()))
        )
    return seen, handles


@torch.no_grad()
def trace(
    model: nn.Module,
    input_ids: list[int],
    segment_ids: list[int],
    position: int,
    attention: str,
    captions: dict[str, str],
) -> dict:
    """Follow one token through every stage of the model, with the numbers captured at each and the caption of
    each stage (`captions`, by stage id: CAPTIONS and the recipe's own)."""
    seen, handles = _capture(model)
    try:
        model(torch.tensor([input_ids]), torch.tensor([segment_ids]), causal=attention == "causal")
    finally:
        for handle in handles:
            handle.remove()

    def at(name: str, pos: int = position) -> list[float]:
        return seen[name][0, pos].tolist()

    heads_count = seen["encoder.attention.softmax"].size(1)  # (B, heads, T, T)
    heads_q = seen["encoder.attention.query"][0].unflatten(-1, (heads_count, -1))  # (T, heads, head_dim)
    heads_k = seen["encoder.attention.key"][0].unflatten(-1, (heads_count, -1))
    scores = seen["encoder.attention.softmax:in"][0, :, position]  # (heads, T)
    weights = seen["encoder.attention.softmax"][0, :, position]  # (heads, T)
    heads = []
    for h in range(weights.size(0)):
        others = [j for j in weights[h].argsort(descending=True).tolist() if j != position]
        heads.append(
            {
                "head": h,
                "query": heads_q[position, h].tolist(),
                "keys": heads_k[:, h].tolist(),
                # With causal attention the keys after the position score minus infinity, which JSON cannot
                # carry: they are None, and the masked keys are named.
                "scores": [v if v != float("-inf") else None for v in scores[h].tolist()],
                "masked": [j for j, v in enumerate(scores[h].tolist()) if v == float("-inf")],
                "weights": weights[h].tolist(),
                "top_context": [
                    {"position": j, "token": input_ids[j], "weight": weights[h, j].item()} for j in others[:2]
                ],
            }
        )
    up, gelu = at("encoder.up"), at("encoder.gelu")

    hidden = seen["mlm_decoder:in"][0, position]  # (WIDTH,) what the decoder reads
    logits = seen["mlm_decoder"][0, position]  # (VOCAB,) what it returned
    table = [
        {
            "token": v,
            "dot": (hidden @ model.word_embeddings.weight[v]).item(),
            "bias": model.mlm_decoder.bias[v].item(),
            "logit": logits[v].item(),
        }
        for v in range(logits.numel())
    ]
    table.sort(key=lambda row: row["logit"], reverse=True)
    exps = logits.double().exp()
    probs = seen["mlm_decoder"][0, position].softmax(-1)  # the run's own softmax of the captured logits
    softmax = [
        {
            "token": row["token"],
            "logit": row["logit"],
            "exp": exps[row["token"]].item(),
            "probability": probs[row["token"]].item(),
        }
        for row in table
    ]
    nsp_logits = seen["nsp_head"][0]
    nsp_probs = nsp_logits.softmax(-1)

    stages = [
        {"id": "tokens", "values": list(input_ids), "token": input_ids[position], "position": position},
        {
            "id": "embeddings",
            "word": at("word_embeddings"),
            "position_embedding": seen["position_embeddings"][position].tolist(),  # (T, WIDTH): no batch axis
            "segment": at("segment_embeddings"),
            "values": at("embedding_norm:in"),
        },
        {"id": "embedding_norm", "input": at("embedding_norm:in"), "values": at("embedding_norm")},
        {"id": "attention", "heads": heads, "mask": attention},
        {
            "id": "attention_output",
            "projected": at("encoder.attention.project"),
            "residual_sum": at("encoder.attention_norm:in"),
            "values": at("encoder.attention_norm"),
        },
        {
            "id": "ffn_up",
            "before_gelu": up,
            "after_gelu": gelu,
            "passed": [i for i, x in enumerate(up) if x > 0],
            "suppressed": [i for i, x in enumerate(up) if x <= 0],
            "values": gelu,
        },
        {
            "id": "ffn_down",
            "down": at("encoder.down"),
            "residual_sum": at("encoder.output_norm:in"),
            "values": at("encoder.output_norm"),
        },
        {"id": "mlm_head", "transform": at("mlm_transform"), "gelu": at("mlm_gelu"), "values": at("mlm_norm")},
        {"id": "logits", "table": table, "values": logits.tolist()},
        {
            "id": "softmax",
            "table": softmax,
            "sum_exp": exps.sum().item(),
            "values": probs.tolist(),
            "predicted": table[0]["token"],
            "confidence": probs.max().item(),
        },
        {
            "id": "nsp",
            "cls": at("encoder.output_norm", 0),
            "pooler": seen["pooler"][0].tolist(),
            "tanh": seen["pooler_tanh"][0].tolist(),  # (B, WIDTH): CLS only
            "logits": nsp_logits.tolist(),
            "values": nsp_probs.tolist(),
            "predicted": ["IsNext", "NotNext"][int(nsp_probs.argmax())],
        },
    ]
    for stage in stages:
        stage["caption"] = captions[stage["id"]]
    return {
        "input_ids": list(input_ids),
        "segment_ids": list(segment_ids),
        "position": position,
        "attention": attention,
        "stages": stages,
    }
