"""The set-up's choice of the torch build: PyTorch's CPU index where it answers, TORCH_INDEX where given."""

import runpy
import subprocess
import sys

from app.services.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "torch-index"


def chosen(monkeypatch, capsys, reachable: bool, index: str = "") -> str:
    monkeypatch.setenv("TORCH_INDEX", index)
    namespace = runpy.run_path(str(SCRIPT))
    monkeypatch.setitem(namespace["main"].__globals__, "reachable", lambda url: reachable)
    namespace["main"]()
    return capsys.readouterr().out.strip()


def test_the_cpu_index_is_added_where_it_answers_and_nothing_where_it_does_not(monkeypatch, capsys):
    assert chosen(monkeypatch, capsys, True) == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert chosen(monkeypatch, capsys, False) == ""


def test_torch_index_chooses_another_build(monkeypatch, capsys):
    cuda = "https://download.pytorch.org/whl/cu128"
    assert chosen(monkeypatch, capsys, True, cuda) == f"--extra-index-url {cuda}"


def test_an_index_out_of_reach_is_told_apart_quickly():
    done = subprocess.run([sys.executable, "-c", f"import runpy; ns = runpy.run_path({str(SCRIPT)!r}); "
                           "print(ns['reachable']('http://127.0.0.1:9'))"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "False", done.stderr
