"""The kernels a process computes with, as settings of that process: no torch here, so that a process that only
starts another (the server's retraining job, a recipe process forked before it computes) can set them without
loading it.

Each numeric library reads its setting at its first use, so a family is set before the process computes anything
(recipe processes: app/compute/worker.py; train.py: run() starts the script again with them). Left to choose by the
processor, ATen, MKL and oneDNN take AVX-512 kernels where it has them, and their sums round otherwise: on an AMD EPYC
with AVX-512, the LSTM, the GPT and the ViT retrained 0.19, 0.14 and 0.05 away from their stored weights, and with
the AVX2 family bit for bit, as on a machine with AVX2 alone. (MKL_CBWR=AVX2 is no such setting: on an AMD processor
MKL takes it as AUTO.) Pinning kernels only makes machines of one vendor agree, though: MKL takes other paths on
Intel and AMD processors whatever it is told, so a recording is checked within the envelopes it measured
(app/domain/envelopes.py), and the portable family is how a test suite plays a reader's other processor.
"""

import json
import platform
from pathlib import Path

# The kernel families a process can be told to use, beside "native" (the processor's own choice, no setting).
FAMILIES: dict[str, dict[str, str]] = {
    # Every x86-64 processor since 2013 has AVX2: the family trainings run on, so that they agree bit for bit.
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    # No vector extension past SSE4: the scalar kernels of ATen, which any processor runs, and the oldest paths of
    # MKL and oneDNN. Their sums round unlike any processor's own choice.
    "portable": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
NATIVE = "native"
NAMES = (NATIVE, *FAMILIES)
# What torch.backends.cpu.get_cpu_capability() answers once a family is in force.
CAPABILITY = {"avx2": "AVX2", "portable": "DEFAULT"}
# In words, for reports and pages.
DESCRIBED = {
    NATIVE: "the kernels torch chose for this processor",
    "avx2": "the AVX2 kernels",
    "portable": "the portable kernels (no vector extension past SSE4)",
}

TRAINING = "avx2"  # the family a training runs on (recipekit.training.run)
KERNELS = FAMILIES[TRAINING]


def settings(family: str) -> dict[str, str]:
    """The environment variables of a family ("native": none); ValueError naming the families for another name."""
    if family == NATIVE:
        return {}
    if family not in FAMILIES:
        raise ValueError(f"no kernel family {family!r}: the families are {', '.join(NAMES)}")
    return FAMILIES[family]


def available(machine: str | None = None) -> tuple[str, ...]:
    """The families this processor can run: AVX2 only on x86-64 (an Arm processor has its own vector kernels)."""
    x86 = (machine or platform.machine()).lower() in ("x86_64", "amd64")
    return tuple(name for name in NAMES if x86 or name != "avx2")


# The processor's vector extensions a report names: those that decide which kernels torch may choose and so how
# its sums round (a training is held to AVX2 on every x86-64 machine).
VECTOR_EXTENSIONS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
)


def processor() -> tuple[str, list[str]]:
    """The CPU's model name and the vector extensions it has (from /proc/cpuinfo where there is one)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return name, []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "cpu model") and value.strip():
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return name, [flag for flag in VECTOR_EXTENSIONS if flag in flags]


def machine() -> str:
    """What names the machine a training ran on, as far as it decides how its sums round with a kernel family: the
    processor's model and vector extensions (JSON, so that two can be compared as text)."""
    name, extensions = processor()
    return json.dumps({"cpu": name, "vector_extensions": extensions})
