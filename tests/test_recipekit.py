"""The recipe kit's train.py entry: a training runs on the kernels the kit names, whatever the shell it was started
from had set, and its main's exit status and arguments pass through."""

import os
import subprocess
import sys

from app.services.config import PROJECT_ROOT
from recipekit import training

SCRIPT = """import os, torch
from recipekit import training

def main(argv):
    print(torch.backends.cpu.get_cpu_capability(), *(os.environ[k] for k in sorted(training.KERNELS)), *argv)
    return 3

training.run(main)
"""


def test_train_py_runs_on_the_kits_kernels_whatever_the_shell_set(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    shell = {k: v for k, v in os.environ.items() if k not in training.KERNELS}
    for settings in ({}, {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}):
        done = subprocess.run([sys.executable, str(script), "--check"], env=shell | settings, cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr
        # ATen reports the kernels it runs (AVX2 on any x86-64 processor since 2013), MKL and oneDNN their caps.
        assert done.stdout.split() == ["AVX2", "avx2", "AVX2", "AVX2", "--check"]
