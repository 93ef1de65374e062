"""The causal DataLab kind: a prompt traced through a pretrained decoder-only checkpoint to its next-token
prediction, block by block (byte-level BPE tokens, every head's attention, the residual stream, the
logit lens); a few tokens generated greedily or by seeded sampling; and activation patching of every head from a
second prompt of the same length."""

from ...numbers import in_prose
from ..cases import metrics
from ..fields import DeclarationError
from ..kind import LabKind, Reads
from .shapes import PromptGeneration, PromptPatching, PromptTrace

ENDPOINTS = ("trace", "generations", "patching")


class CausalDataLab(LabKind):
    name = "causal_datalab"
    requires = {"endpoints": ENDPOINTS}
    reads = {
        "trace": Reads(keys=("checkpoint", "tokens", "attention", "residual", "lens", "top", "prediction")),
        "generations": Reads(keys=("prompt", "steps", "text", "strategy", "seed", "temperature")),
        "patching": Reads(keys=("tokens", "corrupted_tokens", "answer", "foil", "clean", "corrupted", "patched",
                                "effect", "stream_effect")),
    }
    says_outcome = ("trace",)  # its live answers' outcome, said as its recorded cases' (result_outcome)
    results = {"trace": PromptTrace, "generations": PromptGeneration, "patching": PromptPatching}
    # The prompt's length in tokens is the checkpoint's tokenizer's to count, in the recipe process.
    limits = {"trace": {"prompt": "At most 48 byte-level BPE tokens."},
              "generations": {"prompt": "At most 48 byte-level BPE tokens.",
                              "steps": "The prompt and the new tokens must fit the checkpoint's positions."},
              "patching": {"prompt": "At most 48 byte-level BPE tokens.",
                           "corrupted": "Must become as many tokens as the prompt."}}

    def check(self, spec) -> None:
        """Every endpoint takes the prompt as a `prompt` text field; patching also a `corrupted` one."""
        for endpoint in ENDPOINTS:
            fields = spec.endpoints[endpoint].fields
            if fields.get("prompt") is None or fields["prompt"].type != "text":
                raise DeclarationError(f"lab.endpoints.{endpoint} of a {self.name} lab needs a `prompt` text field")
        corrupted = spec.endpoints["patching"].fields.get("corrupted")
        if corrupted is None or corrupted.type != "text":
            raise DeclarationError(f"lab.endpoints.patching of a {self.name} lab needs a `corrupted` text field")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case with the trace request that made it."""
        return [{"id": case["id"], "label": case["label"], "request": case["request"], "endpoint": "trace"}
                for case in cases if isinstance(case.get("request"), dict) and "prompt" in case["request"]]

    def example(self, endpoint: str, presets: list[dict], spec) -> dict | None:
        """The first recorded prompt (else the trace's default prompt), for every endpoint: traced, continued by two
        tokens, and patched from itself."""
        prompt = presets[0]["request"]["prompt"] if presets else spec.endpoints["trace"].fields["prompt"].default
        if prompt is None:
            return None
        return {"trace": {"prompt": prompt}, "generations": {"prompt": prompt, "steps": 2},
                "patching": {"prompt": prompt, "corrupted": prompt}}[endpoint]

    def outcome(self, case: dict, spec) -> str | None:
        """“After “3 1 4 1 =” it predicts “1” next, with probability 1.”: the recorded trace's most likely next token,
        named by the recording (the checkpoint's tokenizer's text)."""
        names = next((v.get("names") for v in case.get("vectors", []) if v["key"] == "top_ids"), None)
        confidence = metrics(case).get("confidence")
        prompt = case.get("request", {}).get("prompt")
        if not names or confidence is None or not isinstance(prompt, str):
            return None
        return predicted(prompt, names[0], confidence)

    def result_outcome(self, endpoint: str, args: dict, result: dict, spec) -> str | None:
        """A live trace's next token, said as a recorded one is."""
        found = result.get("prediction") or {}
        if not isinstance(found.get("text"), str) or not isinstance(found.get("probability"), int | float):
            return None
        return predicted(args["prompt"], found["text"], found["probability"])


def predicted(prompt: str, token: str, probability: float) -> str:
    return f"After “{prompt}” it predicts “{token}” next, with probability {in_prose(probability, 2)}."


KIND = CausalDataLab()
