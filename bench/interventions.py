"""The cost of an intervention against a plain run of the same lab request, per model, in one process.

    python bench/interventions.py [--repeat N]

Both are timed inside this process as a recipe worker runs them (the lab entry called directly, and
compute/intervene.py with one `zero` on the model's first module): the plain run's median, and the
intervention's median and its ratio to the plain run twice over: `first`, on an input the process has not
run (the request runs as asked, then changed: about 2x is its floor), and `again`, another intervention on an
input it has (the run as asked is kept by the worker, so only the changed run and its hooks are paid: a
reader stacking changes on one case, or a lab input run first in the lab).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(functions: list, repeat: int) -> list[float]:
    """Each function's median time; the functions take turns in every round, so that a drift in the
    machine's load falls on all of them alike."""
    times: list[list[float]] = [[] for _ in functions]
    for _ in range(repeat):
        for function, kept in zip(functions, times, strict=True):
            started = time.perf_counter()
            function()
            kept.append(time.perf_counter() - started)
    return [statistics.median(kept) for kept in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat

    import torch

    from app.compute.intervene import intervene
    from app.domain.catalog import load_catalog
    from app.domain.lru import SizedLRU
    from app.domain.recipes import load_module

    torch.set_num_threads(1)
    catalog = load_catalog(ROOT / "manifests", ROOT / "recipes")
    print(f"{'model':<10} {'plain ms':>9} {'first ms':>9} {'ratio':>6} {'again ms':>9} {'ratio':>6}")
    for slug, model in sorted(catalog.models.items()):
        cases = model.manifest["experiment"]["cases"]
        if not model.has_lab or not cases:
            print(f"{slug:<10} (no recorded case to run without its checkpoint)")
            continue
        endpoint = next(e for e in model.lab.endpoints.values() if e.answers == "case")
        request = {k: v for k, v in model.lab.kind.presets(cases, model.lab)[0]["request"].items()
                   if k in endpoint.fields}
        entry = getattr(load_module(model.recipe_dir, "lab"), endpoint.entry)
        node = next(layer["id"] for layer in model.manifest["layers"]
                    if layer["kind"] in ("layer", "module") and "@" not in layer["id"])
        step = [{"node": node, "action": "zero", "target": node, "on": "output"}]
        entry(**json.loads(json.dumps(request)))  # warm: imports, first allocations
        root = model.manifest.get("className", "")
        memo = SizedLRU(64 * 1024 * 1024)
        intervene(entry, request, step, [], 0, root, memo, slug)  # the input has run once in this process
        plain, first, again = timed([
            lambda entry=entry, request=request: entry(**request),
            lambda entry=entry, request=request, step=step, root=root: intervene(entry, request, step, [], 0, root),
            lambda entry=entry, request=request, step=step, root=root, memo=memo, slug=slug:
                intervene(entry, request, step, [], 0, root, memo, slug)], repeat)
        print(f"{slug:<10} {plain * 1000:>9.2f} {first * 1000:>9.2f} {first / plain:>6.2f} {again * 1000:>9.2f} "
              f"{again / plain:>6.2f}")


if __name__ == "__main__":
    main()
