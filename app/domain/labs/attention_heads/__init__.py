"""The attention-heads lab kind: type a sequence, and read every head of every layer at full size, the letters on
both axes, the two patterns interpretability names marked on each map (the letter just before: a previous-token
head; just after each earlier place of the query's letter: an induction head), every head scored on both, and any
head switched off to see the attention and the loss before and after."""

from ..cases import attention_axes, metrics, sequence_presets, vectors
from ..kind import LabKind, Reads, check_sequence_field


class AttentionHeads(LabKind):
    name = "attention-heads"
    token_vectors = ("tokens",)
    requires = {"sizes": ("vocab", "steps"), "endpoints": ("runs",)}
    # A run's case: every head's map (attention_l<layer>_h<head>), where an induction head would look, every head's
    # previous-token score, its induction score where a letter repeats, and the loss at every position.
    reads = {"runs": Reads(items=("tokens", "attention_*", "induction_targets", "previous_token_scores",
                                  "position_loss"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the tokens; token names, where given, name every token of the vocabulary."""
        check_sequence_field(spec, self.name, "tokens")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the run request that replays it: its tokens."""
        return sequence_presets(cases, "tokens")

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """Every map runs over the sequence both ways (queries down, keys across); the next-token distribution has
        a row per token and a column per word of the vocabulary."""
        tokens = vectors(case).get("tokens")
        if tokens is None:
            return {}
        named = spec.tokens(tokens)
        found = {}
        for matrix in case.get("matrices", []):
            if matrix["key"].startswith("attention_") or matrix["key"] == "induction_targets":
                found[matrix["key"]] = attention_axes(named, named)
            elif matrix["key"] == "next_token_probs":
                found[matrix["key"]] = {"rows": named, "columns": spec.tokens(list(range(spec.sizes["vocab"])))}
        return found

    def vector_names(self, case: dict, spec) -> dict[str, list[str]]:
        """The tokens by name, and each loss by the token it is predicted after."""
        found = super().vector_names(case, spec)
        if "tokens" in found:
            found.setdefault("position_loss", found["tokens"][:-1])
        return found

    def outcome(self, case: dict, spec) -> str | None:
        """Which head looks one token back and which copies, how strongly, and what that does to the loss: “Layer 0 ·
        head 3 looks one letter back (0.98); layer 1 · head 3 looks just after earlier places of the letter (0.78).
        After a letter seen before the loss is 0.47 nats; elsewhere 3.3.”"""
        found, measured = vectors(case), metrics(case)
        previous = found.get("previous_token_scores")
        names = next((v.get("names") for v in case.get("vectors", []) if v.get("key") == "previous_token_scores"), None)
        if not previous or not names:
            return None
        thing = spec.words.get("thing", "token")
        best = max(range(len(previous)), key=previous.__getitem__)
        said = f"{names[best].capitalize()} looks one {thing} back ({previous[best]:.2f})"
        induction = found.get("induction_scores")
        if not induction:
            loss = measured.get("unseen_loss", measured.get("loss"))
            return f"{said}. No {thing} repeats, so there is nothing to copy: every next {thing} is a guess " \
                   f"({loss:.2f} nats of loss)."
        copier = max(range(len(induction)), key=induction.__getitem__)
        said += f"; {names[copier]} looks just after earlier places of the {thing} ({induction[copier]:.2f})."
        if "seen_loss" in measured and "unseen_loss" in measured:
            said += (f" After a {thing} seen before the loss is {measured['seen_loss']:.2f} nats; elsewhere "
                     f"{measured['unseen_loss']:.2f}.")
        elif "seen_loss" in measured:
            said += f" After a {thing} seen before the loss is {measured['seen_loss']:.2f} nats."
        return said


KIND = AttentionHeads()
