"""Plain runs kept for interventions, shared by the recipe processes of a machine through a folder
(compute/shared_runs.py): another web process's recipe process finds a run one of them kept, and answers as if it
had run it."""

import hashlib
import os
import shutil
import time
from pathlib import Path

import torch

from app import create_app
from app.compute.intervene import intervene, plain_run
from app.compute.shared_runs import RunsFolder, SharedRuns, pack
from app.domain.steps import Step
from app.services.config import TestConfig
from app.services.parts import parts

from .conftest import GPT_RECIPE, recipe_module

URL = "/api/models/{}/interventions"
MIB = 2**20


def counting(entry, calls: list):
    def counted(**args):
        calls.append(args)
        return entry(**args)

    return counted


def test_a_run_kept_by_one_process_is_read_back_by_another_exactly_as_it_was_kept(tmp_path):
    """What one process keeps (its answer, every output, each output's squared norm) another reads back whole,
    bit for bit: a change there runs the changed run alone and answers as if nothing were kept."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    args, key = {"input_ids": [1, 5, 7, 3]}, "run-key:live_run:input"
    scale = [Step(node="h.1.mlp", action="scale", factor=2.0, target="h.1.mlp", on="output")]
    def process() -> SharedRuns:  # a recipe process's kept runs, reading the folder
        return SharedRuns(64 * MIB, RunsFolder(tmp_path, 64 * MIB))

    one, other = process(), process()
    plain, base, kept = plain_run(entry, args, 0, "GPT", one, key)
    assert not kept and len(list(tmp_path.glob("*.run"))) == 1

    read_plain, read = other.get(key)
    assert read_plain == plain and read.keys == base.keys and read.shapes == base.shapes
    assert torch.equal(read.values, base.values) and read.values.dtype == base.values.dtype
    assert read.squares == base.squares and read.places == base.places and read.offsets == base.offsets
    assert torch.equal(read.lengths, base.lengths) and read.block == base.block and read.owners == base.owners

    calls: list = []
    changed = intervene(counting(entry, calls), args, scale, [], 0, "GPT", process(), key)
    assert len(calls) == 1 and changed["plain_run_kept"]  # the changed run alone
    assert changed | {"plain_run_kept": False} == intervene(entry, args, scale, [], 0, "GPT")

    there = {"input_ids": [2, 2, 9, 4]}  # a patch's source read from the folder gives the outputs a run of it gives
    plain_run(entry, there, 0, "GPT", one, "there")
    patch = [Step(node="h.0.mlp", action="patch", source=0, target="h.0.mlp", on="output")]
    calls.clear()
    patched = intervene(counting(entry, calls), args, patch, [there], 0, "GPT", process(), key, ["there"])
    assert len(calls) == 1 and patched | {"plain_run_kept": False} == intervene(entry, args, patch, [there], 0, "GPT")


def test_a_file_that_is_not_a_whole_run_of_its_key_is_a_miss_and_the_folder_keeps_to_its_bound(tmp_path):
    """A cut file, another key's run under this key's name, or a folder that cannot be read is a miss (the input
    runs again), never an error; past the folder's bound the runs least recently used go first."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    folder = RunsFolder(tmp_path, 64 * MIB)
    plain, base, _ = plain_run(entry, {"input_ids": [1, 5]}, 0, "GPT", None, None)
    folder.save("a", plain, base)
    whole = folder.path("a").read_bytes()
    assert folder.load("a")[1] == len(whole)
    folder.path("a").write_bytes(whole[:-3])
    assert folder.load("a") is None
    folder.path("b").write_bytes(whole)  # "a"'s run where "b"'s would be
    assert folder.load("b") is None
    folder.path("a").write_bytes(b"\x00" * 4)
    assert folder.load("a") is None and folder.load("never kept") is None

    size = len(pack("k0", plain, base))
    small = RunsFolder(tmp_path / "small", 2 * size + size // 2)  # room for two runs
    for index in range(3):
        small.save(f"k{index}", plain, base)
        os.utime(small.path(f"k{index}"), (index, index))  # written one after another
    small.load("k1")  # read lately: kept over k2, written later but not read since
    small.save("k3", plain, base)
    assert [small.load(f"k{index}") is not None for index in range(4)] == [False, True, False, True]
    (tmp_path / "small" / "left-by-a-dead-writer.part").write_bytes(b"x")
    os.utime(tmp_path / "small" / "left-by-a-dead-writer.part", (0, 0))
    small.trim()
    assert not list((tmp_path / "small").glob("*.part"))
    shutil.rmtree(tmp_path / "small")  # removed under a running process: its writes and reads miss, quietly
    small.save("k4", plain, base)
    assert small.load("k4") is None


def test_the_folder_is_a_cache_never_an_authority(tmp_path):
    """A forged answer with the right key, a number no run holds (10**400 among the squares) or a link is a miss,
    and is removed: the input runs again, never an error, and no link is followed."""
    entry = recipe_module(GPT_RECIPE, "lab").live_run
    folder = RunsFolder(tmp_path / "runs", 64 * MIB)
    plain, base, _ = plain_run(entry, {"input_ids": [1, 5]}, 0, "GPT", None, None)
    folder.save("a", plain, base)
    whole = bytearray(folder.path("a").read_bytes())
    length = int.from_bytes(whole[:8], "little")
    header = bytes(whole[8:8 + length])
    forged = header.replace(b'"answer"', b'"answer" ', 1)  # the same key, another answer: its digest fails
    folder.path("a").write_bytes(len(forged).to_bytes(8, "little") + forged + bytes(whole[8 + length:]))
    assert folder.load("a") is None and not folder.path("a").exists()
    folder.save("a", plain, base)
    header = folder.path("a").read_bytes()[8:8 + length].decode()
    squares = header[header.index('"squares": [') + 12:header.index("]", header.index('"squares": ['))]
    overflowing = header.replace(squares, "1" + "0" * 400 + squares[squares.index(","):] if "," in squares
                                 else "1" + "0" * 400).encode()
    body = len(overflowing).to_bytes(8, "little") + overflowing + bytes(whole[8 + length:-32])
    folder.path("a").write_bytes(body + hashlib.sha256(b"a" + body).digest())  # its digest holds: still no run
    assert folder.load("a") is None and not folder.path("a").exists()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not the server's")
    folder.path("a").symlink_to(target)
    assert folder.load("a") is None and not folder.path("a").is_symlink() and target.read_bytes() == b"not the server's"


def test_a_lab_run_kept_by_one_web_process_serves_a_first_change_asked_of_another(tmp_path):
    """Two web processes (gunicorn's workers) on one machine: the lab run one of them answered and kept, a first
    change asked of the other runs the changed run alone, and answers as a server that keeps nothing does; with no
    shared folder, the other runs the input again."""
    from app.compute.worker import KEEP_AFTER_IDLE_SECONDS

    class Shared(TestConfig):
        SHARED_RUNS_DIR = str(tmp_path / "runs")

    class Apart(TestConfig):
        KEEP_LAB_RUNS = False

    answered, asked_of, apart = create_app(Shared), create_app(Shared), create_app(Apart)
    tokens, change = [1, 0, 0, 1, 1, 0, 1], [{"node": "cell", "action": "zero"}]
    try:
        pool = parts(answered).pool
        pool.prestart()
        deadline = time.monotonic() + 60
        while not pool.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(KEEP_AFTER_IDLE_SECONDS)  # a reader's pause: a process answering runs back to back keeps none
        request = answered.test_client().post("/api/models/lstm/runs", json={"tokens": tokens}).get_json()["request"]
        deadline = time.monotonic() + 60  # the run is kept after the reply, in time the process would idle
        while not list(Path(tmp_path / "runs").glob("*.run")) and time.monotonic() < deadline:
            time.sleep(0.05)
        changed = asked_of.test_client().post(URL.format("lstm"), json={"request": request, "interventions": change})
        alone = apart.test_client().post(URL.format("lstm"), json={"request": request, "interventions": change})
        assert changed.status_code == alone.status_code == 200
        assert changed.get_json()["plain_run_kept"] and not alone.get_json()["plain_run_kept"]
        ignored = ("plain_run_kept", "compute_seconds", "environment")
        assert {k: v for k, v in changed.get_json().items() if k not in ignored} \
            == {k: v for k, v in alone.get_json().items() if k not in ignored}
    finally:
        for app in (answered, asked_of, apart):
            parts(app).pool.shutdown()


def test_a_shared_folder_that_cannot_be_made_leaves_each_process_its_own_runs(tmp_path):
    """A SHARED_RUNS_DIR that cannot be made (a file stands there) costs the sharing, never a run: the recipe process
    starts, answers, and keeps its runs to itself."""
    (tmp_path / "taken").write_text("a file, not a folder")

    class Unwritable(TestConfig):
        SHARED_RUNS_DIR = str(tmp_path / "taken" / "runs")

    app = create_app(Unwritable)
    try:
        client = app.test_client()
        body = {"case": "nested", "interventions": [{"node": "cell", "action": "zero"}]}
        first = client.post(URL.format("lstm"), json=body)
        again = client.post(URL.format("lstm"), json=body | {"interventions": [
            {"node": "cell", "action": "scale", "factor": 2}]})
        assert first.status_code == again.status_code == 200
        assert again.get_json()["plain_run_kept"]  # kept in the process itself
    finally:
        parts(app).pool.shutdown()
