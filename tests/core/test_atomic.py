"""core.atomic: whole files or none, with the umask's permissions, for every result writer."""

import contextlib
import os
import stat
from pathlib import Path

import tensorflow as tf
from absl.testing import parameterized

from core import atomic
from core.atomic import atomic_open, atomic_path, write_atomically
from data_prep.datasets.conll import Sentence, write_conll_predictions
from evaluation.results import write_eval_results
from network.config import BertConfig
from tests.fixtures import TestCase


@contextlib.contextmanager
def umask(value: int):
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _dead_pid() -> int:
    """The ID of a process that has exited."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


class AtomicWritesTest(TestCase, parameterized.TestCase):

    @parameterized.parameters((0o022, 0o644), (0o077, 0o600), (0o002, 0o664))
    def test_result_files_follow_the_umask(self, mask, expected):
        tmp_path = self.tmp_path()
        with umask(mask):
            write_eval_results(tmp_path / "eval_results.txt", {"eval_accuracy": 0.5})
            BertConfig.preset("L2_H128").to_json_file(tmp_path / "bert_config.json")
            write_conll_predictions(tmp_path / "valid_predictions.txt",
                                    [Sentence(["Paris"], ["B-LOC"], 0, "x:1")], [["B-LOC"]])
            write_atomically(tmp_path / "deep" / "folder" / "blob.bin", b"\x00\x01")
        for name in ("eval_results.txt", "bert_config.json", "valid_predictions.txt",
                     "deep/folder/blob.bin"):
            self.assertEqual(mode(tmp_path / name), expected, name)
        self.assertEqual((tmp_path / "deep" / "folder" / "blob.bin").read_bytes(), b"\x00\x01")

    def test_a_failed_write_leaves_the_old_file_and_no_temporary(self):
        tmp_path = self.tmp_path()
        target = tmp_path / "sweep_results.tsv"
        target.write_text("old\n")
        with self.assertRaisesRegex(RuntimeError, "scoring failed"):
            with atomic_open(target) as writer:
                writer.write("half a ta")
                raise RuntimeError("scoring failed")
        self.assertEqual(target.read_text(), "old\n")
        self.assertEqual(os.listdir(tmp_path), ["sweep_results.tsv"])

    def test_atomic_path_renames_what_was_written_under_the_temporary_name(self):
        tmp_path = self.tmp_path()
        target = tmp_path / "features.npy"
        with atomic_path(target) as temporary:
            self.assertEqual(os.path.dirname(temporary), str(tmp_path))
            self.assertTrue(os.path.basename(temporary).startswith(".features.npy."), temporary)
            with open(temporary, "wb") as writer:
                writer.write(b"data")
            self.assertFalse(target.exists())
        self.assertEqual(target.read_bytes(), b"data")
        self.assertEqual(os.listdir(tmp_path), ["features.npy"])

    def test_dead_writers_temporaries_go_and_live_ones_stay(self):
        tmp_path = self.tmp_path()
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
        self.assertLen(removed, 2)
        self.assertEqual(sorted(os.listdir(tmp_path)), sorted(live))
        self.assertEqual(atomic.remove_dead_temporaries(tmp_path / "missing"), [])

    def test_temporary_folder_is_named_for_its_writer_and_removed_after(self):
        tmp_path = self.tmp_path()
        with atomic.temporary_folder(tmp_path / "bert_model.ckpt") as staging:
            self.assertTrue(os.path.isdir(staging))
            self.assertIn(f".bert_model.ckpt.{os.getpid()}-", staging)
        self.assertFalse(os.path.exists(staging))

    def test_a_temporary_name_tells_the_name_it_stands_in_for(self):
        for name in ("eval_results.txt", "bert_model.ckpt", ".hidden", "a.1-0123abcd.partial"):
            temporary = os.path.basename(atomic.temporary_name(name))
            self.assertEqual(atomic.temporary_target(temporary), name)
        for name in ("eval_results.txt", ".eval_results.txt.12-0123abcd", ".x.12-XYZ.partial"):
            self.assertIsNone(atomic.temporary_target(name))

    def test_atomic_folder_replaces_the_old_folder_whole(self):
        tmp_path = self.tmp_path()
        target = tmp_path / "data"
        target.mkdir()
        (target / "old.txt").write_text("old")
        with atomic.atomic_folder(target) as staging:
            (Path(staging) / "new.txt").write_text("new")
            self.assertTrue((target / "old.txt").exists(),
                            "the old folder stays until the new one is whole")
        self.assertEqual(sorted(os.listdir(target)), ["new.txt"])
        self.assertEqual(sorted(os.listdir(tmp_path)), ["data"])

    def test_a_failed_atomic_folder_keeps_the_old_one_and_leaves_nothing(self):
        tmp_path = self.tmp_path()
        target = tmp_path / "data"
        target.mkdir()
        (target / "old.txt").write_text("old")
        with self.assertRaises(RuntimeError):
            with atomic.atomic_folder(target) as staging:
                (Path(staging) / "half.txt").write_text("half")
                raise RuntimeError("killed while writing")
        self.assertEqual(sorted(os.listdir(target)), ["old.txt"])
        self.assertEqual(sorted(os.listdir(tmp_path)), ["data"])


if __name__ == "__main__":
    tf.test.main()
