"""The diffusion lab kind: draw a new image out of noise from a seed and step through the whole reverse process
(the image at each step, the noise the model predicts in it, the clean image that prediction implies, and the
step's loss term); or bury a drawing in noise up to a chosen step and watch the model bring an image back. What
an image shows is named in the recipe's words (`lab.words.thing`: "digit")."""

from ...numbers import in_prose
from ..cases import metrics
from ..fields import DeclarationError
from ..kind import LabKind, Reads

# A chain's case: its image at every step, the predicted noise and x̂_0 at every step (a row per step), and each
# step's loss term by timestep.
CHAIN = ("chain", "noise", "predicted", "step_loss")


class Diffusion(LabKind):
    name = "diffusion"
    requires = {"sizes": ("rows", "cols", "levels", "steps"), "endpoints": ("sample", "denoise"), "words": ("thing",)}
    reads = {"sample": Reads(items=(*CHAIN, "seed")), "denoise": Reads(items=("image", *CHAIN, "start", "noise_seed"))}

    def check(self, spec) -> None:
        """A sample takes a seed; a denoising takes a drawing of the declared size and the step to noise it to, at
        most the number of steps."""
        seed = spec.endpoints["sample"].fields.get("seed")
        if seed is None or seed.type != "int":
            raise DeclarationError(f"lab.endpoints.sample of a {self.name} lab needs a `seed` int field")
        fields = spec.endpoints["denoise"].fields
        image, start = fields.get("image"), fields.get("start")
        if image is None or image.type != "grid":
            raise DeclarationError(f"lab.endpoints.denoise of a {self.name} lab needs an `image` grid field")
        if start is None or start.type != "int" or start.min != 1 or start.max != spec.sizes["steps"]:
            raise DeclarationError(f"lab.endpoints.denoise of a {self.name} lab needs a `start` int field from 1 to "
                                   "the steps")
        if "noise_seed" not in fields:
            raise DeclarationError(f"lab.endpoints.denoise of a {self.name} lab needs a `noise_seed` int field")

    def presets(self, cases: list[dict], spec) -> list[dict]:
        """Each recorded chain as the request that replays it: a sample by its seed, a drawing denoised by its
        image, its step and its noise's seed."""
        presets = []
        for case in cases:
            found = metrics(case)
            image = next((m["values"] for m in case.get("matrices", []) if m["key"] == "image"), None)
            if image is not None and "start" in found and "noise_seed" in found:
                endpoint = "denoise"
                request = {"image": image, "start": int(found["start"]), "noise_seed": int(found["noise_seed"])}
            elif "seed" in found and any(m["key"] == "chain" for m in case.get("matrices", [])):
                endpoint, request = "sample", {"seed": int(found["seed"])}
            else:
                continue
            presets.append({"id": case["id"], "label": case["label"], "endpoint": endpoint, "request": request})
        return presets


    def outcome(self, case: dict, spec) -> str | None:
        """“Drew a digit that looks most like a “7”” (a sample), or how far a drawing denoised back came (the recipe's
        `looks_like` metric: the digit whose average held-out image lies nearest)."""
        found = metrics(case)
        if "last_signal" in found and "steps" in found:  # the forward process
            return (f"After {int(found['steps'])} steps of added noise {found['last_signal']:.1%} of the digit is "
                    "left: sampling starts from what is all but pure noise.")
        if "test_loss" in found and "test_size" in found:  # the held-out split
            return (f"Predicts the noise added to the {int(found['test_size']):,} held-out digits with a mean squared "
                    f"error of {in_prose(found['test_loss'], 2)} (guessing no noise at all scores 1).")
        if "looks_like" not in found:
            return None
        digit = f"a digit that looks most like a “{int(found['looks_like'])}”"
        if "start" in found:
            away = (f", {in_prose(found['distance'], 2)} grey levels from the drawing on average"
                    if "distance" in found else "")
            return f"Noised to step {int(found['start'])} and denoised back to {digit}{away}."
        seed = f" from noise seed {int(found['seed'])}" if "seed" in found else ""
        return f"Drew {digit}{seed}."

KIND = Diffusion()
