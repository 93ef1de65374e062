"""What-if runs, BERT's full corruption sampler, and a stage-by-stage trace of one token.

    python lab.py trace 1,4,3,2,6,2 --position 2          # follow one token through the model
    python lab.py corrupt 1,4,5,2,6,2 --seed 7            # sample BERT's 15% / 80-10-10 corruption

Needs torch, the recipe kit (recipekit.masked_lm: the sampler and the trace), model.py and run.py beside this file.
"""

import argparse
import json
import sys

from recipekit import masked_lm
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import CLS, MASK, SEP, VOCAB, build_model
from .run import CaseInputs, run_case


def live_run(
    input_ids: list[int],
    segment_ids: list[int],
    mlm_positions: list[int],
    original_ids: list[int],
    nsp_label: int,
    attention: str,
) -> dict:
    """A what-if case on the recorded weights, in the manifest's case shape."""
    case = CaseInputs(input_ids, original_ids, segment_ids, sorted(mlm_positions), nsp_label)
    return run_case(build_model(), case, causal=attention == "causal")


def sample_corruption(input_ids: list[int], seed: int, segment_ids: list[int]) -> dict:
    """BERT's masking (15% selected; of those 80% masked, 10% a random token, 10% kept), never CLS or SEP; the
    same seed gives the same draw, with the what-if run request that scores it."""
    return masked_lm.sample_corruption(input_ids, seed, segment_ids, vocab=VOCAB, mask=MASK, special=(CLS, SEP))


CAPTIONS = masked_lm.CAPTIONS | {
    "tokens": "The sequence as token ids; the traced position is the one we follow.",
    "embeddings": "Three learned vectors are looked up and added: the token's word embedding, its position's "
    "embedding and its segment's (A or B) embedding.",
    "attention": "Each head compares this token's query with every position's key; softmax turns the scaled "
    "scores into weights that sum to one, and the output mixes the positions' values by them.",
    "ffn_up": "The feed-forward network widens the vector to 32 values and applies GELU, which passes "
    "positive values nearly unchanged and squeezes negative ones towards zero.",
    "ffn_down": "A second linear layer brings the 32 values back to 8; residual plus LayerNorm again gives "
    "the encoder's output for this token.",
    "logits": "Each vocabulary entry's logit is the dot product of the vector with that token's row of the "
    "word-embedding matrix (the decoder weight is tied to it) plus the decoder's bias.",
    "nsp": "For the sentence pair, the CLS position's output goes through the tanh pooler and a two-way "
    "head: IsNext or NotNext.",
}


def trace(input_ids: list[int], segment_ids: list[int], position: int, attention: str) -> dict:
    """Follow one token through every stage of the model, with the numbers captured at each (the server's
    lab kind chooses the position when a request names none: the first MASK)."""
    return masked_lm.trace(build_model(), input_ids, segment_ids, position, attention, CAPTIONS)


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
                print(
                    f"   token {row['token']:2}  logit {row['logit']:8.4f}  exp {row['exp']:10.4f}  "
                    f"p {row['probability']:.4f}"
                )
            print(f"   sum of exp {stage['sum_exp']:.4f}; predicted token {stage['predicted']}")
        elif "values" in stage:
            print("   " + " ".join(f"{v:.4g}" for v in stage["values"][:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
