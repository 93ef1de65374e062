"""What-if runs of the diffusion model: a new digit drawn from a seed, every step shown; and a drawing noised to a
chosen step and denoised back.

    python lab.py sample 7            # the digit seed 7 becomes, with its chain every 10 steps
    python lab.py denoise 14 --start 40 --noise-seed 3   # test digit 14 noised to step 40 and denoised back

Needs torch, safetensors, model.py, run.py, weights.safetensors and the recipe kit's held-out digits.
"""

import argparse
import sys

from recipekit import digits
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model
from .run import denoise_case, sample_case


def sample(seed: int) -> dict:
    """A new digit from the seed's noise, every step of the reverse process, in the manifest's case shape."""
    return sample_case(build_model(), seed)


def denoise(image: list[list[int]], start: int = 40, noise_seed: int = 0) -> dict:
    """The drawing noised to step `start` with the seed's noise, then denoised back, in the manifest's case shape."""
    return denoise_case(build_model(), image, start, noise_seed)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("seed", type=int)
    d = sub.add_parser("denoise")
    d.add_argument("digit", type=int, help="position in the test split")
    d.add_argument("--start", type=int, default=40)
    d.add_argument("--noise-seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "sample":
        case = sample(args.seed)
    else:
        case = denoise(digits.held_out()[0][args.digit].tolist(), args.start, args.noise_seed)
    chain = next(m for m in case["matrices"] if m["key"] == "chain")
    shown = [(name, row) for name, row in zip(chain["rows"], chain["values"], strict=True)][::10] + [
        (chain["rows"][-1], chain["values"][-1])
    ]
    print("  ".join(f"{name:<8}" for name, _ in shown))
    for r in range(8):  # the steps side by side, one character per pixel
        print(
            "  ".join(
                f"{''.join(' .:-=+*#%@'[min(9, int(v * 10 / 16.01))] for v in row[8 * r : 8 * r + 8]):<8}"
                for _, row in shown
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
