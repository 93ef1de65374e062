"""The set-up's choice of the torch build: PyTorch's CPU index where it answers, TORCH_INDEX where given."""

import runpy
import subprocess
import sys

import pytest

from app.services.config import PROJECT_ROOT, ConfigError, TestConfig

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


@pytest.mark.parametrize("setting, value, message", [
    ("RECIPE_TIMEOUT", 0, "TENSORVIZ_RECIPE_TIMEOUT must be a number above 0, not 0"),
    ("RECIPE_WORKERS", 0, "TENSORVIZ_RECIPE_WORKERS must be a number at least 1, not 0"),
    ("RECIPE_QUEUE", "many", "TENSORVIZ_RECIPE_QUEUE must be a number at least 0, not 'many'"),
    ("EXECUTOR", "threads", "TENSORVIZ_EXECUTOR must be one of local, celery, not 'threads'"),
    ("JOB_STALE_SECONDS", 0.5, "TENSORVIZ_JOB_STALE_SECONDS must be above TENSORVIZ_JOB_HEARTBEAT_SECONDS"),
    ("RECIPE_WORKERS", 1.5, "TENSORVIZ_RECIPE_WORKERS must be a number at least 1, not 1.5; a whole number"),
    ("RECIPE_TIMEOUT", True, "TENSORVIZ_RECIPE_TIMEOUT must be a number above 0, not True"),
    ("DEBUG", "yes", "TENSORVIZ_DEBUG must be true or false, not 'yes'"),
    ("RECIPES_DIR", None, "TENSORVIZ_RECIPES_DIR must be text or a folder's path, not None"),
    ("EXECUTOR", "celery", "TENSORVIZ_EXECUTOR=celery needs TENSORVIZ_CELERY_BROKER_URL or TENSORVIZ_REDIS_URL"),
])
def test_a_setting_out_of_range_is_refused_at_start(make_app, setting, value, message):
    with pytest.raises(ConfigError) as refused:
        make_app(type("Config", (TestConfig,), {setting: value}))
    assert str(refused.value).startswith(message)


def test_a_setting_from_the_environment_is_checked_too(make_app, monkeypatch):
    monkeypatch.setenv("TENSORVIZ_RECIPE_TIMEOUT", "0")
    with pytest.raises(ConfigError, match="TENSORVIZ_RECIPE_TIMEOUT must be a number above 0, not 0"):
        make_app(None)  # the default settings, read from the environment


def test_the_compute_workers_read_the_settings_by_the_same_rule(monkeypatch):
    """compute_worker.py checks and types the settings as the factory does: the same refusal, the same types."""
    monkeypatch.setenv("TENSORVIZ_REDIS_URL", '"redis://127.0.0.1:1/0"')
    monkeypatch.setenv("TENSORVIZ_RECIPE_TIMEOUT", "45")
    read = runpy.run_path(str(PROJECT_ROOT / "compute_worker.py"))["settings"]()
    assert read["RECIPE_TIMEOUT"] == 45.0 and isinstance(read["RECIPE_TIMEOUT"], float)
    monkeypatch.setenv("TENSORVIZ_RECIPE_TIMEOUT", "0")
    with pytest.raises(ConfigError, match="TENSORVIZ_RECIPE_TIMEOUT must be a number above 0, not 0"):
        runpy.run_path(str(PROJECT_ROOT / "compute_worker.py"))


def test_the_app_runs_with_each_setting_as_its_declared_type(make_app, monkeypatch):
    """A whole number set where seconds are declared is read as a float once, at start: no reader converts it."""
    monkeypatch.setenv("TENSORVIZ_WARMUP_TIMEOUT", "45")  # JSON: the int 45
    app = make_app({"TESTING": True, "STATE_PATH": None, "STATE_MAX_BYTES": 10_000_000})
    assert app.config["WARMUP_TIMEOUT"] == 45.0 and isinstance(app.config["WARMUP_TIMEOUT"], float)
    assert isinstance(app.config["STATE_MAX_BYTES"], int) and app.config["EXECUTOR"] == "local"


def test_every_setting_is_declared_with_its_type():
    """Config is the one settings class: each setting it holds has an annotation, its type and range."""
    from typing import get_type_hints

    from app.services.config import Config

    assert {name for name in vars(Config) if name.isupper()} == set(get_type_hints(Config))
