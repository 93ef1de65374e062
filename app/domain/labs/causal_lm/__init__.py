"""The causal-LM lab kind (a decoder that predicts the next token): what-if runs, step-by-step
generation, and a stage-by-stage trace of one position through the blocks."""

from ..cases import attention_axes, input_tokens, quoted, vectors
from ..fields import fail
from ..kind import LabKind, Reads, check_names
from .shapes import CausalTrace, Generation


class CausalLM(LabKind):
    name = "causal-lm"
    token_vectors = ("input_ids",)
    requires = {"sizes": ("context", "vocab"), "endpoints": ("runs", "generations", "trace")}
    reads = {
        "runs": Reads(items=("next_token_probs", "loss", "position_loss", "attention_b*")),
        "generations": Reads(keys=("output_ids", "text", "steps", "strategy", "temperature", "seed")),
        "trace": Reads(keys=("position", "stages"),
                       stages=("tokens", "embeddings", "block*", "final_norm", "logits", "prediction")),
    }
    results = {"generations": Generation, "trace": CausalTrace}
    limits = {"generations": {"steps": "Every token a step reads must fit the context (the last new token is never "
                                       "read): steps is at most the context size minus len(input_ids), plus 1."},
              "trace": {"position": "At most len(input_ids) - 1; the last token when absent."}}

    def check(self, spec) -> None:
        """Token names, where given, name every token of the vocabulary."""
        check_names(spec, "vocab", "tokens")

    def prepare(self, endpoint: str, args: dict, spec) -> dict:
        """A trace's position defaults to the last token; a generation must leave room to grow."""
        if endpoint == "trace":
            last = len(args["input_ids"]) - 1
            args.setdefault("position", last)
            if args["position"] > last:
                fail("position", f"{args['position']} is past the last token ({last})")
        if endpoint == "generations":
            room = spec.sizes["context"] - len(args["input_ids"]) + 1  # the last new token is never read
            if args["steps"] > room:
                fail("steps", f"{args['steps']} new tokens do not fit: the context holds {spec.sizes['context']} "
                              f"and the prompt has {len(args['input_ids'])}, so at most {room}")
        return args

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the run request that replays it: its prompt."""
        presets = []
        for case in cases:
            ids = vectors(case).get("input_ids")
            if ids is not None:
                presets.append({"id": case["id"], "label": case["label"], "request": {"input_ids": ids}})
        return presets

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """Attention runs over the prompt both ways; the next-token distribution has a row per prompt token
        and a column per word of the vocabulary."""
        tokens = input_tokens(case, spec)
        if tokens is None:
            return {}
        vocabulary = spec.tokens(list(range(spec.sizes["vocab"])))
        found = {}
        for matrix in case.get("matrices", []):
            if len(matrix["values"]) != len(tokens):
                continue
            if matrix["key"].startswith("attention"):
                found[matrix["key"]] = attention_axes(tokens, tokens)
            elif matrix["key"] == "next_token_probs":
                found[matrix["key"]] = {"rows": tokens, "columns": vocabulary}
        return found

    def example(self, endpoint: str, presets: list[dict], spec) -> dict | None:
        """The first preset's prompt; a generation of one step, which always fits."""
        request = super().example(endpoint, presets, spec)
        return request if request is None or endpoint != "generations" else request | {"steps": 1}


    def outcome(self, case: dict, spec) -> str | None:
        """Where the recipe says what the right answer is: “After “3 1 4 1 =” it answered “1 1 3 4”: right”, or what
        it should be. The answer is read from the last positions, the first of them the prompt's end."""
        found = vectors(case)
        if "answer" not in found or "expected" not in found or "input_ids" not in found:
            return None
        answer, expected = ([spec.token_name(t) for t in found[key]] for key in ("answer", "expected"))
        ids = found["input_ids"]
        prompt = [spec.token_name(t) for t in ids[:max(1, len(ids) - len(answer) + 1)]]
        said = f"After {quoted(prompt)} it answered {quoted(answer)}"
        if answer == expected:
            return f"{said}: right."
        return f"{said}: wrong, the right answer is {quoted(expected)}."


KIND = CausalLM()
