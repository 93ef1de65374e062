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
    """torch.use_deterministic_algorithms(True), as recipes and their trainers call it. It also sets torch.compile's
    flag, importing torch._inductor's configuration (seconds of imports): a recipe process forked from the pool's
    server finds it imported there (pool.worker_context)."""
    torch.use_deterministic_algorithms(True)


def manual_seed(torch: ModuleType, value: int) -> None:
    """torch.manual_seed for what a recipe process runs on, the CPU: torch.manual_seed also queues a seed for
    every accelerator not started, formatting a stack trace for each (as long as a small model's whole run)."""
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


def cap_cpu(seconds: float) -> None:
    """Stop this process (SIGXCPU) once it has used `seconds` of CPU time, whatever it waits on meanwhile: a bound on
    the work a learner's variant may take, not on how long it waits for a core (0: no cap)."""
    if seconds <= 0:
        return
    import math
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(used.ru_utime + used.ru_stime + seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))


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
