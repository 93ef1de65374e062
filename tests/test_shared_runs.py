"""What if?'s plain runs shared by the recipe processes of a machine through a folder (compute/shared_runs.py): a
recipe process of another web process finds the run one of them kept, and answers as if it had run it."""

import os
import shutil
import time
from pathlib import Path

import pytest
import torch

from app.compute.intervene import intervene, plain_run
from app.compute.messages import SharedRunsFolder
from app.compute.shared_runs import LENGTH, RunsFolder, SharedRuns
from app.domain.steps import Step
from app.services.config import TestConfig

from .conftest import GPT_RECIPE, recipe_module

MIB = 2**20
URL = "/api/models/{}/interventions"


def counting(entry, calls: list):
    def counted(**args):
        calls.append(args)
        return entry(**args)

    return counted


def folder_at(path: Path, max_bytes: int = 64 * MIB) -> RunsFolder:
    opened = RunsFolder.opened(SharedRunsFolder(str(path), max_bytes))
    assert opened is not None
    return opened


def test_a_run_kept_by_one_process_is_read_back_by_another_exactly_as_it_was_kept(tmp_path):
    """What one process keeps (the entry's answer, every output, each output's squared norm) another reads back
    whole, bit for bit: a change there runs the changed run alone and answers as a process that keeps nothing does;
    a patch's source read back gives the outputs a run of it gives."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    args, key = {"input_ids": [1, 5, 7, 3]}, "run-key:live_run:input"
    scale = [Step(node="h.1.mlp", action="scale", factor=2.0, target="h.1.mlp", on="output")]

    def process() -> SharedRuns:  # a recipe process's plain runs, reading the folder
        return SharedRuns(64 * MIB, folder_at(tmp_path / "runs"))

    one = process()
    plain, base, cached = plain_run(entry, args, 0, "GPT", one, key)
    assert not cached and len(list((tmp_path / "runs").glob("*.run"))) == 1
    assert os.stat(tmp_path / "runs").st_mode & 0o777 == 0o700

    read_plain, read = process().get(key)
    assert read_plain == plain and read.keys == base.keys and read.shapes == base.shapes
    assert torch.equal(read.values, base.values) and read.values.dtype == base.values.dtype
    assert read.squares == base.squares and read.places == base.places and read.offsets == base.offsets
    assert torch.equal(read.lengths, base.lengths) and read.block == base.block and read.owners == base.owners

    calls: list = []
    changed = intervene(counting(entry, calls), args, scale, [], 0, "GPT", process(), key)
    assert len(calls) == 1 and changed["plain_run_cached"]  # the changed run alone
    assert changed | {"plain_run_cached": False} == intervene(entry, args, scale, [], 0, "GPT")

    there = {"input_ids": [2, 2, 9, 4]}
    plain_run(entry, there, 0, "GPT", one, "there")
    patch = [Step(node="h.0.mlp", action="patch", source=0, target="h.0.mlp", on="output")]
    calls.clear()
    patched = intervene(counting(entry, calls), args, patch, [there], 0, "GPT", process(), key, ["there"])
    assert len(calls) == 1
    assert patched | {"plain_run_cached": False} == intervene(entry, args, patch, [there], 0, "GPT")


def test_a_file_that_is_not_a_whole_run_of_its_key_is_a_miss_and_is_removed(tmp_path):
    """A cut file, another key's run under this key's name, a square no run holds, or a link is a miss (the input
    runs again), never an error, and is removed; no link is followed."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    folder = folder_at(tmp_path / "runs")
    plain, base, _ = plain_run(entry, {"input_ids": [1, 5]}, 0, "GPT", None, None)
    folder.save("a", plain, base)
    whole = folder.path("a").read_bytes()
    assert folder.load("a")[0][0] == plain and folder.load("a")[1] == len(whole)  # the bytes its file takes

    folder.path("a").write_bytes(whole[:-3])
    assert folder.load("a") is None and not folder.path("a").exists()
    folder.path("b").write_bytes(whole)  # "a"'s run where "b"'s would be
    assert folder.load("b") is None and not folder.path("b").exists()
    length = int.from_bytes(whole[:LENGTH], "little")
    header = whole[LENGTH:LENGTH + length]
    negative = header.replace(b'"squares":[', b'"squares":[-', 1)
    folder.path("a").write_bytes(len(negative).to_bytes(LENGTH, "little") + negative + whole[LENGTH + length:])
    assert folder.load("a") is None and not folder.path("a").exists()
    folder.path("a").write_bytes(b"\x00" * 4)
    assert folder.load("a") is None and folder.load("never kept") is None

    target = tmp_path / "elsewhere"
    target.write_bytes(whole)
    folder.path("a").symlink_to(target)
    assert folder.load("a") is None and not folder.path("a").is_symlink() and target.read_bytes() == whole


def test_a_run_whose_values_were_changed_or_a_fifo_in_its_place_is_a_miss_at_once(tmp_path):
    """A file with the right key and header but altered values does not check out (its SHA-256), and a FIFO at a
    run's path is refused without blocking the reader (it is no regular file); both are removed."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    folder = folder_at(tmp_path / "runs")
    plain, base, _ = plain_run(entry, {"input_ids": [1, 5]}, 0, "GPT", None, None)
    folder.save("a", plain, base)
    whole = bytearray(folder.path("a").read_bytes())
    whole[-5] ^= 0x40  # one bit of the last value
    folder.path("a").write_bytes(bytes(whole))
    assert folder.load("a") is None and not folder.path("a").exists()

    os.mkfifo(folder.path("a"))
    started = time.monotonic()
    assert folder.load("a") is None and not folder.path("a").exists()
    assert time.monotonic() - started < 5


def test_the_folder_keeps_to_its_bound_the_least_recently_used_going_first(tmp_path):
    """Past the folder's bound, the runs least recently written or read go first; a part left by a process that died
    while writing is removed; a folder removed under a running process makes its writes and reads quiet misses."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    plain, base, _ = plain_run(entry, {"input_ids": [1, 5]}, 0, "GPT", None, None)
    probe = folder_at(tmp_path / "probe")
    probe.save("k", plain, base)
    size = probe.path("k").stat().st_size
    small = folder_at(tmp_path / "small", 2 * size + size // 2)  # room for two runs
    for index in range(3):
        small.save(f"k{index}", plain, base)
        os.utime(small.path(f"k{index}"), (index, index))  # written one after another
    small.load("k1")  # read lately: kept over k2, written later but not read since
    small.save("k3", plain, base)
    small.trim()
    assert [small.path(f"k{index}").exists() for index in range(4)] == [False, True, False, True]

    left = tmp_path / "small" / "left-by-a-dead-writer.part"
    left.write_bytes(b"x")
    os.utime(left, (0, 0))
    small.trim()
    assert not left.exists()
    shutil.rmtree(tmp_path / "small")
    small.save("k4", plain, base)
    assert small.load("k4") is None


@pytest.mark.parametrize("setup", ["a file", "open to others", "a link"])
def test_a_folder_that_is_not_this_users_alone_is_not_used(tmp_path, setup):
    """A SHARED_RUNS_DIR that cannot be made (a file stands there), that others may write into, or that is a link is
    not used: each recipe process keeps its runs to itself."""
    path = tmp_path / "runs"
    if setup == "a file":
        path.write_text("not a folder")
    elif setup == "open to others":
        path.mkdir(mode=0o777)
        path.chmod(0o777)
    else:
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        path.symlink_to(tmp_path / "elsewhere")
    assert RunsFolder.opened(SharedRunsFolder(str(path), MIB)) is None


def test_the_default_folder_is_this_users_among_the_machines_temporary_files():
    """SHARED_RUNS_DIR "" names this user's folder in /dev/shm (memory) where the machine has one; None shares
    nothing."""
    found = SharedRunsFolder.configured({"SHARED_RUNS_DIR": "", "SHARED_RUNS_MAX_BYTES": 5})
    assert found.path.endswith(f"tensorviz-runs-{os.geteuid()}") and found.max_bytes == 5
    if Path("/dev/shm").is_dir():
        assert found.path.startswith("/dev/shm/")
    assert SharedRunsFolder.configured({"SHARED_RUNS_DIR": None, "SHARED_RUNS_MAX_BYTES": 5}) is None


def test_a_first_change_asked_of_another_web_process_finds_the_run_the_options_made(tmp_path, make_app):
    """Two web processes (gunicorn's workers) of one machine: the options one of them answered ran the case and kept
    it, and a first change asked of the other runs the changed run alone, answering as a server that shares nothing
    does; a folder that cannot be made costs the sharing, never an answer."""
    (tmp_path / "taken").write_text("a file, not a folder")

    class Shared(TestConfig):
        SHARED_RUNS_DIR = str(tmp_path / "runs")

    class Unwritable(TestConfig):
        SHARED_RUNS_DIR = str(tmp_path / "taken" / "runs")

    answered, asked_of, apart, unwritable = make_app(Shared), make_app(Shared), make_app(TestConfig), \
        make_app(Unwritable)
    options = answered.test_client().post(URL.format("lstm") + "/options", json={"case": "nested"})
    assert options.status_code == 200 and list((tmp_path / "runs").glob("*.run"))  # the case, and patch sources
    body = {"case": "nested", "interventions": [{"node": "cell", "action": "zero"}]}
    changed = asked_of.test_client().post(URL.format("lstm"), json=body)
    alone = apart.test_client().post(URL.format("lstm"), json=body)
    assert changed.status_code == alone.status_code == 200
    assert changed.get_json()["plain_run_cached"] and not alone.get_json()["plain_run_cached"]
    ignored = ("plain_run_cached", "compute_seconds", "environment")
    assert {k: v for k, v in changed.get_json().items() if k not in ignored} \
        == {k: v for k, v in alone.get_json().items() if k not in ignored}

    client = unwritable.test_client()
    assert client.post(URL.format("lstm"), json=body).status_code == 200
    again = client.post(URL.format("lstm"), json=body | {"interventions": [
        {"node": "cell", "action": "scale", "factor": 2}]})
    assert again.status_code == 200 and again.get_json()["plain_run_cached"]  # kept in its own process
