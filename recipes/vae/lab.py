"""What-if runs on a drawn digit: its code and reconstruction, any code decoded, the line between two
drawings' codes, and the decoder's map of the latent plane.

    python lab.py decode 0.5 -1.2     # the image the decoder draws at z = (0.5, -1.2)
    python lab.py between 14 5        # test digit 14 to test digit 5 in 8 steps

Needs torch, safetensors, model.py, run.py and the two .safetensors files beside this file.
"""

import argparse
import sys

import torch

from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import decode as decode_codes
from .run import interpolation, latent_map, run_case, test_split


def live_run(image: list[list[int]]) -> dict:
    """A what-if case on the trained weights, in the manifest's case shape."""
    return run_case(build_model(), image)


def decode(code: list[float]) -> dict:
    """The decoder's image at one code, in grey levels (probability of ink × 16)."""
    return {"code": code, "image": decode_codes(build_model(), torch.tensor([code]))[0].tolist()}


def between(a: list[list[int]], b: list[list[int]], steps: int = 8) -> dict:
    """The codes on the line from drawing a's mean to drawing b's, and the decoder's image at each."""
    codes, images = interpolation(build_model(), a, b, steps)
    return {"codes": codes.tolist(), "images": images.tolist(), "ends": [codes[0].tolist(), codes[-1].tolist()]}


def plane(steps: int = 7, extent: float = 2.4) -> dict:
    """The decoder's image at every code of a steps x steps grid over [-extent, extent]² (rows from +extent
    down z₂, columns along z₁)."""
    axis, images = latent_map(build_model(), steps, extent)
    return {"axis": axis.tolist(), "images": images.tolist()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decode")
    d.add_argument("code", type=float, nargs="+")
    b = sub.add_parser("between")
    b.add_argument("a", type=int, help="position in the test split")
    b.add_argument("b", type=int)
    args = parser.parse_args(argv)
    if args.command == "decode":
        images = [decode(args.code)["image"]]
    else:
        test_images, _, _ = test_split()
        images = between(test_images[args.a].tolist(), test_images[args.b].tolist())["images"]
    for row in range(len(images[0])):  # the images side by side, one character per pixel
        print("  ".join("".join(" .:-=+*#%@"[min(9, int(v * 10 / 16.01))] for v in image[row]) for image in images))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
