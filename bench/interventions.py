"""The cost of an intervention against a plain run of the same lab request, per model, in one process.

    python bench/interventions.py [--repeat N]

Both are timed inside this process as a recipe worker runs them (the lab entry called directly, and
compute/intervene.py with one `zero` on the model's first module): the plain run's median, and the
intervention's median and its ratio to the plain run (the median of each round's ratio) twice over: `first`,
on an input the process has not run (the request runs as asked, then changed: about 2x is its floor), and
`kept`, on an input it has kept the run of (only the changed run and its hooks are paid): every recorded case,
which a recipe process runs and keeps at its warm-up, and any input changed a second time. `patch` is a `patch`
of the same module from a recorded case, both runs kept (the source's outputs come from its kept run).
`warm-up` is what keeping every recorded case of the model costs a recipe process once: the time and the
memory. `calls` counts the module calls of the plain run and of the changed one: a change may make more work
(a blinded agent wanders longer), and `a call` sets `kept`'s cost of a module call against the plain run's.

The second table goes through a recipe process as the server does (compute/pool.py: the pipe, the JSON reply,
the worker's own seeding), each round on an input the process has not run (its key new): `lab` is the lab
run, whose reply the process follows by running it again with hooks and keeping it; `later` is the first change
to that input asked a moment after (`--pause`), when the process may still be keeping the lab run; `reader` is
the same after `--reader-pause` (a reader who picks a node and an action takes longer than a second), when the
lab run is kept; `first` is a change to an input never run (an API client's); `other` is `reader`'s change asked of
the recipe process of another web process (gunicorn's next worker), which reads the lab run from the folder the
recipe processes of a machine share (SHARED_RUNS_DIR). Each ratio is the median of the
rounds' ratios, each change set against a lab run of its round that followed as long an idle (`reader`'s
against a lab run asked `--reader-pause` after the call before it).

The third table asks what one batch of two (the request as asked and as changed, run as one forward) could
save on a first change: `model` is the share of a plain run spent in the recorded model's own calls (the
outermost ones the entry makes; the rest is the entry's own work: building the model, reading weights, turning
tensors into its answer), `batch 2` what those calls cost with each tensor argument doubled along its first
axis against the calls as made (- where an argument or an answer has no batch axis of one), and `floor` what a
first change would cost at best so: the batched calls once, and the entry's own work twice (once for each
answer), with no bookkeeping at all.
"""

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(functions: list, repeat: int) -> list[list[float]]:
    """Each function's times, one a round; the functions take turns in every round, so that a drift in the
    machine's load falls on all of them alike."""
    times: list[list[float]] = [[] for _ in functions]
    for _ in range(repeat):
        for function, kept in zip(functions, times, strict=True):
            started = time.perf_counter()
            function()
            kept.append(time.perf_counter() - started)
    return times


def ratio(times: list[float], against: list[float]) -> float:
    """The median of each round's ratio: a burst of load on the shared machine moves a round's two times
    together, and its ratio less than either."""
    return statistics.median(a / b for a, b in zip(times, against, strict=True))


def module_calls(function) -> int:
    """How many module calls `function()` makes."""
    import torch

    count = 0

    def counted(module, args) -> None:
        nonlocal count
        count += 1

    handle = torch.nn.modules.module.register_module_forward_pre_hook(counted)
    try:
        function()
    finally:
        handle.remove()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.2, help="seconds of idle before each timed call")
    parser.add_argument("--reader-pause", type=float, default=1.0, help="seconds between a lab run and `reader`")
    parser.add_argument("--models", help="the slugs to measure, separated by commas (default: every model)")
    options = parser.parse_args()
    repeat = options.repeat

    import torch

    from app.compute.intervene import intervene, plain_run
    from app.compute.worker import entry_function
    from app.domain.catalog import load_catalog
    from app.domain.checkpoints import CheckpointUnavailable, find
    from app.domain.lru import SizedLRU
    from app.domain.steps import Step
    from app.services.config import Config
    from app.services.subjects import subject

    torch.set_num_threads(1)
    catalog = load_catalog(ROOT / "manifests", ROOT / "recipes")
    through_a_process = []
    batchable = []
    print(f"{'model':<10} {'plain ms':>9} {'first ms':>9} {'ratio':>6} {'kept ms':>9} {'ratio':>6} "
          f"{'patch ms':>9} {'ratio':>6} {'warm-up: cases':>15} {'ms':>6} {'MiB':>5} {'calls':>11} {'a call':>6}")
    chosen = set(options.models.split(",")) if options.models else set(catalog.models)
    for slug, model in sorted(catalog.models.items()):
        if slug not in chosen:
            continue
        cases = model.manifest["experiment"]["cases"]
        if not cases:
            print(f"{slug:<10} (no recorded case to run without its checkpoint)")
            continue
        # Every case as the service runs it (a lab's preset request, or the case replayed where no lab runs it).
        try:  # the server's own arguments: the checkpoint folder where the recipe reads one
            context = {} if model.checkpoint is None else {
                "checkpoint": str(find(model.checkpoint, None, Config.CHECKPOINTS_DIR).folder)}
        except CheckpointUnavailable:
            print(f"{slug:<10} (its checkpoint is not on this machine: make checkpoints)")
            continue
        asked = subject(model, {"case": cases[0]["id"]})
        requests = [{**subject(model, {"case": case["id"]}).args, **context} for case in cases
                    if subject(model, {"case": case["id"]}).entry == asked.entry]
        request = {**asked.args, **context}
        entry = entry_function(model.recipe_dir, asked.entry)
        node = next(layer["id"] for layer in model.manifest["layers"]
                    if layer["kind"] in ("layer", "module") and "@" not in layer["id"])
        step = [Step(node=node, action="zero", target=node, on="output")]
        patch = [Step(node=node, action="patch", source=0, target=node, on="output")]
        entry(**json.loads(json.dumps(request)))  # warm: imports, first allocations
        root = model.manifest.get("className", "")
        kept_runs = SizedLRU(64 * 1024 * 1024)
        started = time.perf_counter()
        for index, each in enumerate(requests):  # as a recipe process's warm-up keeps them
            plain_run(entry, each, 0, root, kept_runs, f"{slug}:{index}")
        warm_up = time.perf_counter() - started
        rounds = timed([
            lambda entry=entry, request=request: entry(**request),
            lambda entry=entry, request=request, step=step, root=root: intervene(entry, request, step, [], 0, root),
            lambda entry=entry, request=request, step=step, root=root, kept_runs=kept_runs, slug=slug:
                intervene(entry, request, step, [], 0, root, kept_runs, f"{slug}:0"),
            lambda entry=entry, request=request, patch=patch, root=root, kept_runs=kept_runs, slug=slug:
                intervene(entry, request, patch, [request], 0, root, kept_runs, f"{slug}:0", [f"{slug}:0"])], repeat)
        plain, first, again, patched = (statistics.median(each) for each in rounds)
        first_ratio, again_ratio, patched_ratio = (ratio(each, rounds[0]) for each in rounds[1:])
        calls = (module_calls(lambda entry=entry, request=request: entry(**request)),
                 module_calls(lambda entry=entry, request=request, step=step, root=root, kept_runs=kept_runs, slug=slug:
                              intervene(entry, request, step, [], 0, root, kept_runs, f"{slug}:0")))
        print(f"{slug:<10} {plain * 1000:>9.2f} {first * 1000:>9.2f} {first_ratio:>6.2f} {again * 1000:>9.2f} "
              f"{again_ratio:>6.2f} {patched * 1000:>9.2f} {patched_ratio:>6.2f} {len(requests):>15} "
              f"{warm_up * 1000:>6.1f} {kept_runs.size / 2**20:>5.2f} {calls[0]:>5} {calls[1]:>5} "
              f"{again_ratio * calls[0] / calls[1]:>6.2f}")
        batchable.append((slug, entry, request, root))
        if model.has_lab and asked.endpoint is not None:  # the second table: a lab run, then changes to its input
            through_a_process.append((slug, model.recipe_dir, asked.entry, request, step, root))
    print(f"\nwhat one batch of two could save on a first change (--repeat {repeat})")
    print(f"{'model':<10} {'model':>6} {'batch 2':>8} {'floor':>6}")
    for slug, entry, request, root in batchable:
        share, doubled = batch_of_two(entry, request, root, repeat)
        shown = ("-", "-") if doubled is None else (f"{doubled:.2f}", f"{2 * (1 - share) + share * doubled:.2f}")
        print(f"{slug:<10} {share:>6.0%} {shown[0]:>8} {shown[1]:>6}")
    print(f"\nthrough a recipe process (--pause {options.pause:g} s, --reader-pause {options.reader_pause:g} s)")
    print(f"{'model':<10} {'lab ms':>9} {'later ms':>9} {'ratio':>6} {'reader ms':>9} {'ratio':>6} {'first ms':>9} "
          f"{'ratio':>6} {'other ms':>9} {'ratio':>6}")
    for row in through_a_process:
        (lab, later, reader, first, other), ratios = pooled(*row[1:], repeat, options.pause, options.reader_pause)
        print(f"{row[0]:<10} {lab * 1000:>9.2f} {later * 1000:>9.2f} {ratios[0]:>6.2f} {reader * 1000:>9.2f} "
              f"{ratios[1]:>6.2f} {first * 1000:>9.2f} {ratios[2]:>6.2f} {other * 1000:>9.2f} {ratios[3]:>6.2f}")


def batch_of_two(entry, request: dict, root: str, repeat: int) -> tuple[float, float | None]:
    """The share of a plain run spent in the recorded model's outermost calls (the median of `repeat` runs), and
    the median ratio of those calls made again at a batch of two (every tensor argument doubled along its first
    axis) to the same calls as made, or None where there is no such call, or an argument or the answer has no
    batch axis of one."""
    import torch
    from torch import nn

    from app.compute.intervene import first_tensor

    call = nn.Module._call_impl
    calls: list[tuple] = []
    under_way, inside = False, 0.0  # a call of the model is under way (its parts are not counted again); its time

    def timed_call(module, *args, **kwargs):
        nonlocal under_way, inside
        if under_way or type(module).__name__ != root:
            return call(module, *args, **kwargs)
        calls.append((module, args, kwargs))
        under_way, started = True, time.perf_counter()
        try:
            return call(module, *args, **kwargs)
        finally:
            under_way, inside = False, inside + time.perf_counter() - started

    shares = []
    for _ in range(repeat):
        calls.clear()
        inside = 0.0
        nn.Module._call_impl = timed_call
        started = time.perf_counter()
        try:
            entry(**request)
        finally:
            nn.Module._call_impl = call
        shares.append(inside / (time.perf_counter() - started))

    def doubled(value):
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 or value.shape[0] != 1:
                raise ValueError("no batch axis of one")
            return torch.cat([value, value])
        return value

    if not calls:  # the entry calls the model's parts one by one, never the model
        return statistics.median(shares), None
    try:
        twice = [(module, [doubled(a) for a in args], {k: doubled(v) for k, v in kwargs.items()})
                 for module, args, kwargs in calls]
    except ValueError:
        return statistics.median(shares), None
    with torch.no_grad():
        for module, args, kwargs in twice:
            first = first_tensor(module(*args, **kwargs))
            if first is None or first.dim() == 0 or first.shape[0] != 2:
                return statistics.median(shares), None
        single, double = timed([lambda: [module(*a, **k) for module, a, k in calls],
                                lambda: [module(*a, **k) for module, a, k in twice]], repeat)
    return statistics.median(shares), ratio(double, single)


def pooled(recipe_dir: Path, entry: str, request: dict, step: list, root: str, repeat: int,
           pause: float, reader_pause: float) -> tuple[list[float], list[float]]:
    """The medians of a lab run and of the changes to its input (the module docstring's second table), each
    round timed from the call to the reply through one recipe process; and the median ratios of the changes,
    each to a lab run of its round that followed as long an idle."""
    import tempfile

    from app.compute.messages import InterveneArgs, KeepRun, RecipeCall, SharedFolder
    from app.compute.pool import WorkerPool

    folder = tempfile.mkdtemp(prefix="tensorviz-bench-runs-")
    shared = SharedFolder(folder, 512 * 2**20)  # as two web processes of one machine share their kept runs
    pool, other = (WorkerPool(size=1, timeout=120, torch_threads=1, seed=0, shared=shared) for _ in range(2))
    times: list[list[float]] = [[], [], [], [], [], []]  # lab, later, lab (reader's), reader, first, other

    def call(made: RecipeCall, kept: list[float], through: WorkerPool = pool) -> None:
        started = time.perf_counter()
        through.run(made)
        kept.append(time.perf_counter() - started)

    try:
        for each in (pool, other):  # warm: the worker started, the recipe imported
            each.run(RecipeCall.lab(recipe_dir, entry, request))
        for index in range(repeat):
            # Each timed call follows a pause (a lab run kept only after the process idled), and each change is
            # set against a lab run that followed as long a pause: a process woken from idle answers slower (a
            # kept change 4.7 ms after another call, 10.8 ms after 0.25 s idle).
            time.sleep(pause)
            call(RecipeCall.lab(recipe_dir, entry, request, {}, KeepRun(root, f"later-{index}")), times[0])
            time.sleep(pause)
            call(RecipeCall.of(recipe_dir, entry, InterveneArgs(request, step, [], root, f"later-{index}")), times[1])
            time.sleep(reader_pause)
            call(RecipeCall.lab(recipe_dir, entry, request, {}, KeepRun(root, f"reader-{index}")), times[2])
            time.sleep(reader_pause)
            call(RecipeCall.of(recipe_dir, entry, InterveneArgs(request, step, [], root, f"reader-{index}")), times[3])
            time.sleep(pause)
            call(RecipeCall.of(recipe_dir, entry, InterveneArgs(request, step, [], root, f"first-{index}")), times[4])
            time.sleep(reader_pause)  # the lab run above (`reader`'s) asked of the other web process's recipe process
            call(RecipeCall.of(recipe_dir, entry, InterveneArgs(request, step, [], root, f"reader-{index}")), times[5],
                 other)
    finally:
        pool.shutdown()
        other.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    lab, later, lab_idle, reader, first, elsewhere = times
    return ([statistics.median(kept) for kept in (lab, later, reader, first, elsewhere)],
            [ratio(later, lab), ratio(reader, lab_idle), ratio(first, lab), ratio(elsewhere, lab_idle)])


if __name__ == "__main__":
    main()
