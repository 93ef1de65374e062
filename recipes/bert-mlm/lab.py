"""What-if runs on the trained tiny BERT or its causal twin, BERT's corruption sampler, and one token followed
through every stage.

    python lab.py trace "[CLS] [MASK] old dogs bark [SEP] they bark loudly [SEP]"            # the model
    python lab.py trace "[CLS] [MASK] old dogs bark [SEP] they bark loudly [SEP]" --causal   # its twin

Needs torch, safetensors, the recipe kit (recipekit.masked_lm: the case, the sampler and the trace), model.py,
train.py and run.py beside this file.
"""

import argparse
import sys

from recipekit import masked_lm
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import CLS, MASK, SEP, WORDS, build_model, causal_twin
from .run import CaseInputs, beside_twin
from .train import SEGMENTS


def model_for(attention: str):
    """The model that reads with this attention: the trained one, or its twin trained under a causal mask."""
    return causal_twin() if attention == "causal" else build_model()


def live_run(
    input_ids: list[int],
    segment_ids: list[int],
    mlm_positions: list[int],
    original_ids: list[int],
    nsp_label: int,
    attention: str,
) -> dict:
    """A what-if case in the manifest's case shape: on the trained model (bidirectional) or on its causal twin."""
    case = CaseInputs(input_ids, original_ids, segment_ids, sorted(mlm_positions), nsp_label)
    if attention == "causal":
        return masked_lm.run_case(causal_twin(), case, causal=True)
    return beside_twin(build_model(), causal_twin(), case)


def sample_corruption(input_ids: list[int], seed: int, segment_ids: list[int]) -> dict:
    """BERT's masking (15% selected; of those 80% masked, 10% a random token, 10% kept), never [CLS] or [SEP]; the
    same seed gives the same draw, with the what-if run request that scores it."""
    return masked_lm.sample_corruption(input_ids, seed, segment_ids, vocab=len(WORDS), mask=MASK, special=(CLS, SEP))


CAPTIONS = masked_lm.CAPTIONS | {
    "tokens": "The two sentences as token ids; the traced position is the one we follow.",
    "embeddings": "Three learned vectors are looked up and added: the word's embedding, its position's and its "
    "sentence's (A or B).",
    "attention": "Each head compares this word's query with every position's key; softmax turns the scaled "
    "scores into weights that sum to one, and the output mixes the positions' values by them. "
    "The trained heads look where the answer is: a masked determiner at its noun, a noun at its verb.",
    "ffn_up": "The feed-forward network widens the vector to 64 values and applies GELU, which passes "
    "positive values nearly unchanged and squeezes negative ones towards zero.",
    "ffn_down": "A second linear layer brings the 64 values back to 32; residual plus LayerNorm again gives "
    "the encoder's output for this word.",
    "logits": "Each word's logit is the dot product of the vector with that word's row of the embedding matrix "
    "(the decoder weight is tied to it) plus the decoder's bias.",
    "nsp": "For the sentence pair, the [CLS] position's output goes through the tanh pooler and a two-way "
    "head: IsNext (the second sentence goes on about the first one's animals) or NotNext.",
}


def trace(input_ids: list[int], segment_ids: list[int], position: int, attention: str) -> dict:
    """Follow one word through every stage of the model (or of its causal twin), with the numbers at each."""
    return masked_lm.trace(model_for(attention), input_ids, segment_ids, position, attention, CAPTIONS)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace")
    t.add_argument("words")
    t.add_argument("--causal", action="store_true")
    args = parser.parse_args(argv)
    ids = [WORDS.index(word) for word in args.words.split()]
    result = trace(ids, SEGMENTS, ids.index(MASK), "causal" if args.causal else "bidirectional")
    for stage in result["stages"]:
        if stage["id"] == "softmax":
            for row in stage["table"][:3]:
                print(f"   {WORDS[row['token']]:8} p {row['probability']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
