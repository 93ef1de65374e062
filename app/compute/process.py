"""What makes a process a recipe process, whatever it then runs: its kernels, deterministic torch, the CPU's seed, a
memory cap.

Its own module, below the worker and the tasks it runs (interventions, training), so that each of them imports it
and none imports another.
"""

import os
from pathlib import Path
from types import ModuleType

from recipekit import kernels


def deterministic(torch: ModuleType) -> None:
    """torch.use_deterministic_algorithms(True) for eager runs. The public call also sets torch.compile's
    flag, importing torch._inductor for it (sympy and some 800 modules: half a worker's start, 3 s), and no
    recipe is compiled; where this torch lacks the eager switch, the public call is made."""
    switch = getattr(torch._C, "_set_deterministic_algorithms", None)
    if switch is None:
        torch.use_deterministic_algorithms(True)
    else:
        switch(True, warn_only=False)


def manual_seed(torch: ModuleType, value: int) -> None:
    """torch.manual_seed for what a recipe process runs on, the CPU: torch.manual_seed also queues a seed for
    every accelerator not started, formatting a stack trace for each (0.1 ms or more, about what a small
    model's whole run takes)."""
    torch.default_generator.manual_seed(value)


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


def use_kernels(torch: ModuleType, family: str) -> None:
    """Make this process compute with a kernel family (recipekit/kernels.py), before it computes anything: each
    library reads its setting at its first use, so a process forked from one that only imported torch can still
    choose. RuntimeError where torch runs other kernels all the same (it computed before, or the processor has no
    such kernels)."""
    os.environ.update(kernels.settings(family))
    expected = kernels.CAPABILITY.get(family)
    chosen = torch.backends.cpu.get_cpu_capability()
    if expected is not None and chosen != expected:
        raise RuntimeError(f"{kernels.DESCRIBED[family]} cannot be used in this process: torch runs {chosen} kernels")
