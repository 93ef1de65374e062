"""Replay the recorded BERT pretraining cases and the four numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, the recipe kit (recipekit: the case, the replay) and model.py beside this file.
"""

import json
import sys
from functools import partial

import torch

from recipekit import replay as kit
from recipekit.masked_lm import CaseInputs, forward, run_case
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import MASK, TinyBertPretraining, build_model, mlm_loss, unpack

SEGMENT_IDS = [0, 0, 0, 0, 1, 1]  # segments A,A,A,A,B,B
ORIGINAL_IDS = [1, 4, 5, 2, 6, 2]  # CLS 4 5 SEP 6 SEP


def masked(original_ids: list[int], selected: list[int], nsp_label: int) -> CaseInputs:
    """A recorded case: every selected token replaced with MASK."""
    corrupted = [MASK if i in selected else t for i, t in enumerate(original_ids)]
    return CaseInputs(corrupted, original_ids, SEGMENT_IDS, selected, nsp_label)


CASES = {
    "mask-a": masked(ORIGINAL_IDS, [2], 0),
    "mask-b": masked(ORIGINAL_IDS, [4], 0),
    "both": masked(ORIGINAL_IDS, [2, 4], 0),
    "not-next": masked(ORIGINAL_IDS, [2], 1),
}


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_BIDIRECTIONAL = "A later token can change earlier token logits through bidirectional attention"
CHECK_IGNORED_TARGETS = "MLM cross entropy ignores all unselected token positions"
CHECK_TIED_DECODER = "The MLM decoder shares the token-embedding weight and receives a learning signal"
CHECK_PACKED_OUTPUT = "Packed MLM/NSP logits have the declared shapes and sentence-pair probabilities sum to one"
CHANGED = 1e-4  # an earlier logit moving by more than this counts as influenced
UNCHANGED = 1e-7  # and by no more than this as untouched


def _earlier_logit_shift(model: TinyBertPretraining, causal: bool) -> float:
    """How far positions 0..3 move when the token at position 4 changes."""
    segments = SEGMENT_IDS
    before = unpack(model(torch.tensor([ORIGINAL_IDS]), torch.tensor([segments]), causal=causal))[0]
    later = list(ORIGINAL_IDS)
    later[4] = 9
    after = unpack(model(torch.tensor([later]), torch.tensor([segments]), causal=causal))[0]
    return (after[0, :4] - before[0, :4]).abs().max().item()


@torch.no_grad()
def check_bidirectional(model: TinyBertPretraining) -> dict:
    """Earlier logits move when a later token changes, and do not under a causal mask (the control)."""
    shift = _earlier_logit_shift(model, causal=False)
    control = _earlier_logit_shift(model, causal=True)
    return {
        "passed": shift > CHANGED and control <= UNCHANGED,
        "detail": {"bidirectional_max_shift": shift, "causal_max_shift": control},
    }


@torch.no_grad()
def check_ignored_targets(model: TinyBertPretraining, loss_fn=mlm_loss) -> dict:
    """Noise on unselected positions leaves the MLM loss alone; noise on a selected one moves it."""
    case = CASES["both"]
    f = forward(model, case.input_ids, case.segment_ids, case.original_ids, case.selected, 0)
    targets = torch.tensor(case.original_ids)
    selected = torch.zeros(len(targets), dtype=torch.bool)
    selected[case.selected] = True
    noise = 5 * torch.randn(f.mlm_logits.shape, generator=torch.Generator().manual_seed(7))
    base = loss_fn(f.mlm_logits, targets, selected)
    unselected_moved = loss_fn(f.mlm_logits + noise * ~selected[:, None], targets, selected)
    selected_moved = loss_fn(f.mlm_logits + noise * selected[:, None], targets, selected)
    unselected_shift = (unselected_moved - base).abs().item()
    selected_shift = (selected_moved - base).abs().item()
    return {
        "passed": unselected_shift <= UNCHANGED and selected_shift > CHANGED,
        "detail": {"unselected_noise_shift": unselected_shift, "selected_noise_shift": selected_shift},
    }


def check_tied_decoder(model: TinyBertPretraining) -> dict:
    """One storage for both matrices, and the MLM loss sends gradient to rows only the decoder uses."""
    shared = model.mlm_decoder.weight.data_ptr() == model.word_embeddings.weight.data_ptr()
    case = CASES["mask-a"]
    model.zero_grad()
    with torch.enable_grad():
        f = forward(model, case.input_ids, case.segment_ids, case.original_ids, case.selected, 0)
        f.mlm_loss.backward()
    grad = model.word_embeddings.weight.grad
    unused = [t for t in range(grad.size(0)) if t not in case.input_ids]
    decoder_signal = grad[unused].norm().item() if grad is not None else 0.0
    model.zero_grad()
    return {
        "passed": shared and decoder_signal > 0.0,
        "detail": {"shares_storage": shared, "decoder_only_rows_grad_norm": decoder_signal},
    }


@torch.no_grad()
def check_packed_output(model: TinyBertPretraining) -> dict:
    """The packed output is (1, 98) = 6 x 16 MLM logits + 2 NSP logits, and NSP softmax sums to one."""
    output = model(torch.tensor([ORIGINAL_IDS]), torch.tensor([SEGMENT_IDS]))
    mlm_logits, nsp_logits = unpack(output)
    nsp_sum = nsp_logits.softmax(-1).sum().item()
    shapes = {"output": list(output.shape), "mlm": list(mlm_logits.shape), "nsp": list(nsp_logits.shape)}
    return {
        "passed": shapes == {"output": [1, 98], "mlm": [1, 6, 16], "nsp": [1, 2]} and abs(nsp_sum - 1.0) <= 1e-6,
        "detail": {**shapes, "nsp_probability_sum": nsp_sum},
    }


CHECKS = {
    CHECK_BIDIRECTIONAL: check_bidirectional,
    CHECK_IGNORED_TARGETS: check_ignored_targets,
    CHECK_TIED_DECODER: check_tied_decoder,
    CHECK_PACKED_OUTPUT: check_packed_output,
}


def replay(model: TinyBertPretraining | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the seeded model unless one is given."""
    model = model if model is not None else build_model()
    return kit.cases(
        {case_id: partial(run_case, model, spec) for case_id, spec in CASES.items()},
        {name: partial(check, model) for name, check in CHECKS.items()},
        case,
    )


def print_table(result: dict) -> None:
    """A plain-text summary of a replay."""
    print(f"{'case':10} {'MLM CE':>8} {'NSP CE':>8} {'total':>8}  {'top MLM prediction':>18}  IsNext")
    for case_id, case in result["cases"].items():
        mlm, nsp, total = (m["value"] for m in case["metrics"])
        vectors = {v["key"]: v["values"] for v in case["vectors"]}
        probs = vectors["first_mask_probabilities"]
        top = max(range(len(probs)), key=probs.__getitem__)
        is_next = vectors["nsp_probabilities"][0]
        prediction = f"id {top} ({probs[top]:.4f})"
        print(f"{case_id:10} {mlm:8.4f} {nsp:8.4f} {total:8.4f}  {prediction:>18}  {is_next:.4f}")
    print()
    for check in result["checks"]:
        print(f"[{'PASS' if check['passed'] else 'FAIL'}] {check['name']}")
        for key, value in check["detail"].items():
            print(f"       {key}: {value}")


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    result = replay()
    if "--json" in argv:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0 if all(check["passed"] for check in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
