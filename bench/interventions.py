"""The cost of an intervention against a plain run of the same lab request, per model, in one process.

    python bench/interventions.py [--repeat N]

Both are timed inside this process as a recipe worker runs them (the lab entry called directly, and
compute/intervene.py with one `zero` on the model's first module): the plain run's median, the
intervention's median, and their ratio. An intervention runs the request twice (as asked and changed) and
names every module call with hooks, so about 2x is its floor.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat

    import torch

    from app.compute.intervene import intervene
    from app.domain.catalog import load_catalog
    from app.domain.recipes import load_module

    torch.set_num_threads(1)
    catalog = load_catalog(ROOT / "manifests", ROOT / "recipes")
    print(f"{'model':<10} {'plain ms':>9} {'intervened ms':>14} {'ratio':>6}")
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
        plain = timed(lambda entry=entry, request=request: entry(**request), repeat)
        changed = timed(lambda entry=entry, request=request, step=step, root=root:
                        intervene(entry, request, step, [], 0, root), repeat)
        print(f"{slug:<10} {plain * 1000:>9.2f} {changed * 1000:>14.2f} {changed / plain:>6.2f}")


if __name__ == "__main__":
    main()
