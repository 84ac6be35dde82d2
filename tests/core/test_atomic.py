"""core.atomic: whole files or none, with the umask's permissions, for every result writer."""

import contextlib
import os
import stat
from pathlib import Path

import pytest

from core import atomic
from core.atomic import atomic_open, atomic_path, write_atomically
from data_prep.datasets.conll import Sentence, write_conll_predictions
from evaluation.results import write_eval_results
from modeling.config import BertConfig


@contextlib.contextmanager
def umask(value: int):
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_result_files_follow_the_umask(tmp_path, mask, expected):
    with umask(mask):
        write_eval_results(tmp_path / "eval_results.txt", {"eval_accuracy": 0.5})
        BertConfig.preset("L2_H128").to_json_file(tmp_path / "bert_config.json")
        write_conll_predictions(tmp_path / "valid_predictions.txt",
                                [Sentence(["Paris"], ["B-LOC"], 0, "x:1")], [["B-LOC"]])
        write_atomically(tmp_path / "deep" / "folder" / "blob.bin", b"\x00\x01")
    for name in ("eval_results.txt", "bert_config.json", "valid_predictions.txt",
                 "deep/folder/blob.bin"):
        assert mode(tmp_path / name) == expected, name
    assert (tmp_path / "deep" / "folder" / "blob.bin").read_bytes() == b"\x00\x01"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "sweep_results.tsv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="scoring failed"):
        with atomic_open(target) as writer:
            writer.write("half a ta")
            raise RuntimeError("scoring failed")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["sweep_results.tsv"]


def test_atomic_path_renames_what_was_written_under_the_temporary_name(tmp_path):
    target = tmp_path / "features.npy"
    with atomic_path(target) as temporary:
        assert os.path.dirname(temporary) == str(tmp_path)
        assert os.path.basename(temporary).startswith(".features.npy.")
        with open(temporary, "wb") as writer:
            writer.write(b"data")
        assert not target.exists()
    assert target.read_bytes() == b"data"
    assert os.listdir(tmp_path) == ["features.npy"]


def _dead_pid() -> int:
    """The ID of a process that has exited."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_dead_writers_temporaries_go_and_live_ones_stay(tmp_path):
    from core import atomic

    dead = _dead_pid()
    (tmp_path / f".eval_results.txt.{dead}-0123abcd.partial").write_text("half")
    (tmp_path / f".bert_model.ckpt.{dead}-89abcdef.partial").mkdir()
    (tmp_path / f".bert_model.ckpt.{dead}-89abcdef.partial" / "shard").write_text("half")
    live = [f".eval_results.txt.{os.getpid()}-0123abcd.partial",  # this process: live
            f".notes.{dead}-0123abcd",  # not a temporary name of ours
            "eval_results.txt"]
    for name in live:
        (tmp_path / name).write_text("kept")
    removed = atomic.remove_dead_temporaries(tmp_path)
    assert len(removed) == 2
    assert sorted(os.listdir(tmp_path)) == sorted(live)
    assert atomic.remove_dead_temporaries(tmp_path / "missing") == []


def test_temporary_folder_is_named_for_its_writer_and_removed_after(tmp_path):
    from core import atomic

    with atomic.temporary_folder(tmp_path / "bert_model.ckpt") as staging:
        assert os.path.isdir(staging)
        assert f".bert_model.ckpt.{os.getpid()}-" in staging
    assert not os.path.exists(staging)


def test_atomic_folder_replaces_the_old_folder_whole(tmp_path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic.atomic_folder(target) as staging:
        (Path(staging) / "new.txt").write_text("new")
        assert (target / "old.txt").exists(), "the old folder stays until the new one is whole"
    assert sorted(os.listdir(target)) == ["new.txt"]
    assert sorted(os.listdir(tmp_path)) == ["data"]


def test_a_failed_atomic_folder_keeps_the_old_one_and_leaves_nothing(tmp_path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic.atomic_folder(target) as staging:
            (Path(staging) / "half.txt").write_text("half")
            raise RuntimeError("killed while writing")
    assert sorted(os.listdir(target)) == ["old.txt"]
    assert sorted(os.listdir(tmp_path)) == ["data"]
