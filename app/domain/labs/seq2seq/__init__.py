"""The sequence-to-sequence lab kind: type a source, and watch an encoder-decoder write its answer one token
at a time: what each step read, what it wrote and where it looked in the source (cross-attention), with the
encoder's and the decoder's own attention."""

from ..cases import attention_axes, quoted, sequence_presets, vectors
from ..kind import LabKind, Reads, check_sequence_field

# The attention a matrix holds, by its key's first word: what its rows and its columns are.
ATTENTION_AXES = {"encoder": ("source", "source"), "decoder": ("decoder_input", "decoder_input"),
                  "cross": ("decoder_input", "source")}


class Seq2Seq(LabKind):
    name = "seq2seq"
    token_vectors = ("source", "decoder_input", "output", "expected")
    requires = {"sizes": ("vocab", "source"), "endpoints": ("runs",)}
    # A run's case: the source, the decoder's input and output at every step, the probability of every token
    # at every step, and attention matrices keyed <encoder|decoder|cross>_attention_l<layer>_h<head>.
    reads = {"runs": Reads(items=("source", "decoder_input", "output", "probabilities", "cross_attention_*"))}

    def check(self, spec) -> None:
        """The runs endpoint takes the source; token names, where given, name every token of the vocabulary."""
        check_sequence_field(spec, self.name, "source")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded case as the run request that replays it: its source."""
        return sequence_presets(cases, "source")

    def axes(self, case: dict, spec) -> dict[str, dict]:
        """Attention rows and columns are source tokens or the decoder's steps (named by the token each step
        read); the distribution has a row per step and a column per token of the vocabulary."""
        found = vectors(case)
        if "source" not in found or "decoder_input" not in found:
            return {}
        named = {key: spec.tokens(found[key]) for key in ("source", "decoder_input")}
        axes = {}
        for matrix in case.get("matrices", []):
            kind, _, rest = matrix["key"].partition("_")
            if rest.startswith("attention") and kind in ATTENTION_AXES:
                rows, columns = (named[k] for k in ATTENTION_AXES[kind])
                if len(matrix["values"]) == len(rows) and all(len(row) == len(columns) for row in matrix["values"]):
                    axes[matrix["key"]] = attention_axes(rows, columns)
                continue
            elif matrix["key"] == "probabilities":
                rows, columns = named["decoder_input"], spec.tokens(list(range(spec.sizes["vocab"])))
            else:
                continue
            if len(matrix["values"]) == len(rows) and all(len(row) == len(columns) for row in matrix["values"]):
                axes[matrix["key"]] = {"rows": rows, "columns": columns}
        return axes


    def outcome(self, case: dict, spec) -> str | None:
        """“Wrote “321” for “123”: right” (the end token left out), or what the right answer is."""
        found = vectors(case)
        if "output" not in found or "source" not in found:
            return None
        def words(ids: list[int]) -> str:
            symbols = [spec.token_name(t) for t in ids if t < spec.sizes["symbols"]]  # the start and end left out
            return quoted(symbols) if symbols else "nothing"
        said_written = f"Wrote {words(found['output'])} for {words(found['source'])}"
        expected = found.get("expected")
        if expected is None:
            return f"{said_written}; there is no right answer to compare it with."
        if found["output"] == expected:
            return f"{said_written}: right."
        return f"{said_written}: wrong, the right answer is {words(expected)}."


KIND = Seq2Seq()
