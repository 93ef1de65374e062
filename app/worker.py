"""The recipe worker: runs in its own process, imports torch, and calls fixed recipe entry points.

Nothing here is imported by the web process except through multiprocessing's spawn, which starts a
fresh interpreter, so the web workers never load torch.
"""

import json
import platform
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType

from .recipes import load_module, read_metadata


def entry_points(recipe_dir: Path) -> dict[str, set[str]]:
    """What a task may call: run.py's replay, and the lab.py functions the recipe's lab declaration names."""
    lab = read_metadata(recipe_dir).get("lab", {})
    return {"run": {"replay"}, "lab": {str(e.get("entry")) for e in lab.get("endpoints", {}).values()}}


def environment(torch: ModuleType, seed: int) -> dict:
    """What the run depended on, as the report states it."""
    import numpy

    return {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "seed": seed,
        "mode": "eval",
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "device": "cpu",
    }


def execute(task: dict, torch: ModuleType, seed: int) -> dict:
    """Run one task: {"recipe_dir", "module", "entry", "args"}."""
    module, entry = task["module"], task["entry"]
    if module == "capture" and entry == "capture":
        from . import capture  # imports torch: only ever inside a worker

        function = capture.capture
        args = {"recipe_dir": task["recipe_dir"], **task.get("args", {})}
    elif entry in entry_points(Path(task["recipe_dir"])).get(module, ()):
        function = getattr(load_module(Path(task["recipe_dir"]), module), entry, None)
        if not callable(function):
            raise ValueError(f"{module}.py has no entry point {entry}()")
        args = task.get("args", {})
    else:
        raise ValueError(f"{module}.{entry} is not a recipe entry point")
    torch.manual_seed(seed)
    started = time.perf_counter()
    result = function(**args)
    return {"result": result, "compute_seconds": time.perf_counter() - started}


def cap_memory(headroom_mb: int) -> None:
    """Cap this process's address space at what it maps now (Python and torch loaded) plus headroom,
    so that a runaway recipe fails with an allocation error instead of exhausting the machine."""
    if headroom_mb <= 0:
        return
    import resource

    status = Path("/proc/self/status").read_text()
    mapped = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmSize:"))) * 1024
    limit = mapped + headroom_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def serve(conn: Connection, torch_threads: int, seed: int, memory_mb: int = 0) -> None:
    """Answer tasks from the pipe until it closes."""
    import torch

    cap_memory(memory_mb)
    torch.set_num_threads(torch_threads)
    torch.use_deterministic_algorithms(True)
    env = environment(torch, seed)
    conn.send({"ready": True})  # torch is loaded: from here on, task timeouts measure the recipe alone
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        try:
            reply = {"ok": True, "environment": env} | execute(task, torch, seed)
            # Plain JSON data only: unpickling a torch object would import torch into the web process.
            reply = json.loads(json.dumps(reply))
        except Exception as exc:  # a recipe's own error goes back to the caller, the worker lives on
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc(limit=8)}
        conn.send(reply)
