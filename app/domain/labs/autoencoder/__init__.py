"""The autoencoder lab kind: draw on a grid of grey levels and see the code the encoder gives it and the
decoder's reconstruction; move through the 2-D latent space (sliders, or a map of what the decoder draws
everywhere) and walk the straight line between two drawings' codes, decoding as you go. What an image shows
is named in the recipe's words (`lab.words.thing`: "digit")."""

from ...numbers import in_prose
from ..cases import metrics, vectors
from ..fields import DeclarationError
from ..kind import LabKind, Reads
from .shapes import Decoded, Path, Plane

LATENT = 2  # the map draws the latent space as a plane


class Autoencoder(LabKind):
    name = "autoencoder"
    requires = {"sizes": ("rows", "cols", "levels", "latent"), "endpoints": ("runs", "decode", "between", "plane"),
                "words": ("thing",)}
    reads = {
        "runs": Reads(items=("image", "reconstruction", "mean", "sigma", "reconstruction_term", "kl", "loss")),
        "decode": Reads(keys=("code", "image")),
        "between": Reads(keys=("codes", "images", "ends")),
        "plane": Reads(keys=("axis", "images")),
    }
    results = {"decode": Decoded, "between": Path, "plane": Plane}

    def check(self, spec) -> None:
        """Drawings are grids of the declared size, a code is `latent` numbers, and the latent space is a plane."""
        for endpoint, names in (("runs", ("image",)), ("between", ("a", "b"))):
            for name in names:
                field = spec.endpoints[endpoint].fields.get(name)
                if field is None or field.type != "grid":
                    raise DeclarationError(f"lab.endpoints.{endpoint} of an {self.name} lab needs a `{name}` grid "
                                           "field")
        code = spec.endpoints["decode"].fields.get("code")
        if code is None or code.type != "numbers" or code.length != spec.sizes["latent"]:
            raise DeclarationError(f"lab.endpoints.decode of an {self.name} lab needs a `code` field of numbers "
                                   "whose length is the latent size")
        if spec.sizes["latent"] != LATENT:
            raise DeclarationError(f"lab.sizes.latent of an {self.name} lab must be {LATENT}: its map is a plane")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded drawing as the run request that replays it."""
        return [{"id": case["id"], "label": case["label"], "request": {"image": image}}
                for case in cases
                if (image := next((m["values"] for m in case.get("matrices", []) if m["key"] == "image"), None))]

    def example(self, endpoint: str, presets: list[dict], spec) -> dict | None:
        """The first recorded drawing (and, between, the second too); the origin to decode; the default map."""
        if not presets:
            return None
        if endpoint == "decode":
            return {"code": [0.0] * spec.sizes["latent"]}
        if endpoint == "between":
            return {"a": presets[0]["request"]["image"], "b": presets[-1]["request"]["image"]}
        if endpoint == "plane":
            return {}
        return super().example(endpoint, presets, spec)


    def outcome(self, case: dict, spec) -> str | None:
        """“Went in looking like a “7” and came back looking like a “1””: each image read as the digit whose average
        held-out image lies nearest (the recipe's `looks_like` metrics)."""
        found = metrics(case)
        path = vectors(case).get("looks_like")
        if path:  # decoded along a line of codes
            drawn = ", ".join(spec.token_name(int(d)) for d in path)
            return (f"Along the line from the first code to the second the decoder draws digits that look most like "
                    f"{drawn}.")
        if {"test_loss", "test_reconstruction", "test_kl", "test_size"} <= found.keys():
            loss, missed, kl = (in_prose(found[key], 3) for key in ("test_loss", "test_reconstruction", "test_kl"))
            return (f"The {int(found['test_size']):,} held-out digits come back at a loss of {loss} nats each on "
                    f"average: {missed} for what the reconstruction misses, {kl} for the code (the KL term).")
        if "looks_like" not in found:
            return None
        back = spec.token_name(int(found["looks_like"]))  # its declared name, else its number
        went = found.get("drawn_looks_like")
        if went is None:
            return f"Came back looking most like a “{back}”."
        went = spec.token_name(int(went))
        if went == back:
            return f"Went in and came back looking most like a “{back}”."
        return f"Went in looking most like a “{went}” and came back looking most like a “{back}”."

KIND = Autoencoder()
