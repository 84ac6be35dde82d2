"""create_pretraining_data end to end: records, shards, workers, reruns, bad inputs."""

import io
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from core import faults
from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining.instances import InstanceOptions
from data_prep.pretraining.local import create_pretraining_data
from training.input_pipeline import pretraining_feature_spec
from tests.data_prep.synthetic_corpus import (CLS, SEP, VOCAB, make_corpus, settings_for,
                                              write_corpus)
from tests.fixtures import REPO, TestCase, launched
from tests.runners.shared_runs import run_logged

pytestmark = pytest.mark.slow


def read_records(paths, max_seq_length=32, max_predictions=5):
    spec = pretraining_feature_spec(max_seq_length, max_predictions)
    return [{name: value.numpy()
             for name, value in tf.io.parse_single_example(record, spec).items()}
            for record in tf.data.TFRecordDataset([str(path) for path in paths])]


def run_cli(*flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data", *flags],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


def cli_flags_of_settings_for(corpus, output, **changes) -> list[str]:
    """The command line that `settings_for(corpus, output)` stands for."""
    folder, vocab = corpus
    flags = {"input_file": folder / "*.txt", "output_file": output, "vocab_file": vocab,
             "num_output_shards": 3, "documents_per_chunk": 2, "num_workers": 1,
             "max_seq_length": 32, "max_predictions_per_seq": 5, "dupe_factor": 3, **changes}
    return [f"--{name}={value}" for name, value in flags.items()]


class CreatePretrainingDataTest(TestCase, parameterized.TestCase):

    def _corpus(self) -> tuple[Path, tuple[Path, Path]]:
        """A fresh folder and the synthetic corpus in it (its `in/` and `vocab.txt`)."""
        tmp_path = self.tmp_path()
        return tmp_path, make_corpus(tmp_path)

    def test_records_shards_and_report(self):
        tmp_path, corpus = self._corpus()
        log = io.StringIO()
        summary = create_pretraining_data(settings_for(corpus, tmp_path / "out" / "data.tfrecord"),
                                          log)
        shards = sorted((tmp_path / "out").glob("data-*-of-00003.tfrecord"))
        self.assertEqual([path.name for path in shards],
                         [f"data-{i:05d}-of-00003.tfrecord" for i in range(3)])
        self.assertEqual(sorted(path.name for path in (tmp_path / "out").iterdir()), sorted(
            [path.name for path in shards] + [f".{path.name}.complete.json" for path in shards]))
        self.assertEqual((summary.documents, summary.empty_documents), (13, 1))
        self.assertEqual(summary.files_without_documents, [str(corpus[0] / "c.txt")])
        self.assertEqual((summary.shards_written, summary.shards_skipped), (3, 0))
        self.assertIn("instances/s", log.getvalue())
        self.assertIn("ETA", log.getvalue())
        records = read_records(shards)
        self.assertLen(records, summary.instances)
        self.assertGreater(summary.instances, 50)
        for record in records:
            ids, length = record["input_ids"].copy(), record["input_mask"].sum()
            used = int(record["masked_lm_weights"].sum())
            self.assertEqual(used, min(5, max(1, round(length * 0.15))))
            positions = record["masked_lm_positions"][:used]
            ids[positions] = record["masked_lm_ids"][:used]  # a random replacement may be [SEP]
            self.assertEqual(ids[0], CLS)
            self.assertEqual(ids[length - 1], SEP)
            self.assertAllEqual(ids[length:], np.zeros_like(ids[length:]))
            self.assertEqual((ids[:length] == SEP).sum(), 2)
            self.assertEqual((ids == CLS).sum(), 1)
            self.assertTrue((np.diff(positions) > 0).all(), positions)
            self.assertTrue((positions < length).all(), positions)
            self.assertEmpty(set(record["masked_lm_ids"][:used]) & {CLS, SEP})
            second = record["segment_ids"].astype(bool)
            self.assertTrue(second[length - 1])
            self.assertFalse(second[:2].any())
            self.assertTrue((np.diff(second[:length]) >= 0).all(), second)
        labels = [record["next_sentence_labels"][0] for record in records]
        self.assertBetween(np.mean(labels), 0.3, 0.7)

    def test_same_bytes_with_one_and_two_workers(self):
        tmp_path, corpus = self._corpus()
        outputs = []
        for workers in (1, 2):
            output = tmp_path / f"w{workers}" / "data.tfrecord"
            create_pretraining_data(settings_for(corpus, output, num_workers=workers),
                                    io.StringIO())
            outputs.append([path.read_bytes() for path in sorted(output.parent.glob("data-*"))])
        self.assertEqual(outputs[0], outputs[1])
        self.assertTrue(all(outputs[0]))

    def test_rerun_skips_complete_shards_and_redoes_changed_ones(self):
        tmp_path, corpus = self._corpus()
        output = tmp_path / "out" / "data.tfrecord"
        create_pretraining_data(settings_for(corpus, output), io.StringIO())
        shards = sorted(output.parent.glob("data-*"))
        first = [path.read_bytes() for path in shards]
        modified = [path.stat().st_mtime_ns for path in shards]
        again = create_pretraining_data(settings_for(corpus, output), io.StringIO())
        self.assertEqual((again.shards_written, again.shards_skipped, again.instances), (0, 3, 0))
        self.assertEqual([path.stat().st_mtime_ns for path in shards], modified)
        shards[1].unlink()
        redo = create_pretraining_data(settings_for(corpus, output), io.StringIO())
        self.assertEqual((redo.shards_written, redo.shards_skipped), (1, 2))
        self.assertEqual([path.read_bytes() for path in shards], first)
        reseeded = create_pretraining_data(settings_for(corpus, output, random_seed=7),
                                           io.StringIO())
        self.assertEqual(reseeded.shards_written, 3)
        self.assertNotEqual([path.read_bytes() for path in shards], first)

    def test_rerun_removes_leftovers_of_dead_runs_only(self):
        tmp_path, corpus = self._corpus()
        folder = tmp_path / "out"
        folder.mkdir()
        finished = subprocess.Popen([sys.executable, "-c", "pass"])
        finished.wait()
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        try:
            dead, alive = finished.pid, live.pid
            leftovers = {
                "dead_shard": folder / f".data-00001-of-00003.tfrecord.{dead}-0a1b2c3d.partial",
                "dead_marker": folder / (f".data-00000-of-00003.tfrecord.complete.json."
                                         f"{dead}-0a1b2c3d.partial"),
                "dead_staging": folder / f".data-00000-of-00003.tfrecord.{dead}-1a2b3c4d.partial",
                "live_shard": folder / f".data-00002-of-00003.tfrecord.{alive}-0a1b2c3d.partial",
                "live_staging": folder / f".data-00000-of-00003.tfrecord.{alive}-a3b4c5d6.partial",
                "reused_pid": folder / f".data-00000-of-00003.tfrecord.{alive}-9f8e7d6c.partial",
                "not_ours": folder / f".notes.txt.{dead}-0a1b2c3d.partial",
            }
            for name, path in leftovers.items():
                if "staging" in name:
                    path.mkdir()
                    (path / "chunk-0.tfrecord").write_bytes(b"x" * 100)
                else:
                    path.write_bytes(b"x" * 100)
            hour_ago = os.stat(leftovers["reused_pid"]).st_mtime - 3600
            os.utime(leftovers["reused_pid"], (hour_ago, hour_ago))  # older than process `alive`
            log = io.StringIO()
            create_pretraining_data(settings_for(corpus, folder / "data.tfrecord"), log)
            gone = {name for name, path in leftovers.items() if not path.exists()}
            self.assertEqual(gone, {"dead_shard", "dead_marker", "dead_staging", "reused_pid"})
            self.assertIn(f"Removed {leftovers['dead_shard']}", log.getvalue())
            self.assertTrue((leftovers["live_staging"] / "chunk-0.tfrecord").exists())
            self.assertLen(list(folder.glob("data-*-of-00003.tfrecord")), 3)
        finally:
            live.kill()
            live.wait()

    def test_cli_ablation_flags(self):
        tmp_path, corpus = self._corpus()
        folder, vocab = corpus
        output = tmp_path / "out" / "lm.tfrecord"
        # In this process: the subject is what the flags make, not the process.
        self.addCleanup(faults.note_resume_point, None)  # what main notes for a fault's line
        result = run_logged("data_prep.create_pretraining_data.py", {
            "input_file": f"{folder / 'a.txt'},{folder / 'b*.txt'}", "output_file": output,
            "vocab_file": vocab, "max_seq_length": 24, "max_predictions_per_seq": 4,
            "no_nsp": True, "masked_lm_prob": 0, "dupe_factor": 2, "num_workers": 1})
        self.assertIn("wrote", result.stderr)
        self.assertIn("from 12 documents to 1 shard", result.stderr)
        records = read_records([output], 24, 4)
        self.assertNotEmpty(records)
        for record in records:
            self.assertFalse(record["segment_ids"].any())
            self.assertEqual(record["next_sentence_labels"][0], 0)
            self.assertFalse(record["masked_lm_weights"].any())
            self.assertFalse(record["masked_lm_ids"].any())
            self.assertEqual((record["input_ids"] == SEP).sum(), 1)

    @parameterized.parameters(
        ("no_match", "matches no files"),
        ("bad_utf8", "b.txt:3: not valid UTF-8"),
        ("too_many_predictions",
         "--max_predictions_per_seq=40 must lie in [0, --max_seq_length=32]"),
        ("ratios", "--mask_ratios=0.5,0.1,0.1 must be three"),
    )
    def test_cli_errors_exit_nonzero_and_leave_nothing(self, case, message):
        tmp_path, corpus = self._corpus()
        folder, vocab = corpus
        flags = {"input_file": str(folder / "a.txt"),
                 "output_file": str(tmp_path / "out" / "x.tfrecord"),
                 "vocab_file": str(vocab), "max_seq_length": "32", "num_workers": "1"}
        if case == "no_match":
            flags["input_file"] += "," + str(folder / "missing*.txt")
        elif case == "bad_utf8":
            (folder / "b.txt").write_bytes(b"good line\nanother\nbad \xff byte\n")
            flags["input_file"] += "," + str(folder / "b.txt")
        elif case == "too_many_predictions":
            flags["max_predictions_per_seq"] = "40"
        else:
            flags["mask_ratios"] = "0.5,0.1,0.1"
        result = run_cli(*(f"--{name}={value}" for name, value in flags.items()))
        self.assertEqual(result.returncode, 1)
        self.assertIn(message, result.stderr)
        self.assertTrue(not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir()))

    @pytest.mark.long
    def test_a_file_size_limit_ends_in_one_line_and_a_rerun_writes_the_same_bytes(self):
        tmp_path, corpus = self._corpus()
        reference = tmp_path / "reference" / "data.tfrecord"
        create_pretraining_data(settings_for(corpus, reference), io.StringIO())
        expected = [path.read_bytes() for path in sorted(reference.parent.glob("data-*"))]
        limit = min(len(shard) for shard in expected) // 2

        output = tmp_path / "out" / "data.tfrecord"
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        limited = subprocess.run(
            launched([sys.executable, "-m", "data_prep.create_pretraining_data",
                      *cli_flags_of_settings_for(corpus, output)], file_size_limit=limit),
            cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(limited.returncode, 1, limited.stderr)
        self.assertNotIn("Traceback", limited.stderr)
        self.assertRegex(
            limited.stderr.strip().splitlines()[-1],
            rf"^python -m data_prep.create_pretraining_data: error: cannot write {re.escape(str(output.parent))}/\S+: "
            r"the file would exceed this process' file-size limit \(ulimit -f\); complete shards "
            r"are kept; make room \(or raise the limit\), then rerun the same command to "
            r"resume\Z")
        self.assertEmpty([path for path in output.parent.iterdir()
                          if path.name.endswith(".partial")])

        rerun = run_cli(*cli_flags_of_settings_for(corpus, output))
        self.assertEqual(rerun.returncode, 0, rerun.stderr)
        self.assertEqual([path.read_bytes() for path in sorted(output.parent.glob("data-*"))],
                         expected)

    @pytest.mark.long
    def test_ctrl_c_to_the_process_group_ends_in_one_line_and_the_rerun_finishes(self):
        tmp_path = self.tmp_path()
        folder = tmp_path / "in"
        folder.mkdir()
        write_corpus(folder / "big.txt", 12000, seed=3)
        (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
        output = tmp_path / "out" / "data.tfrecord"
        flags = cli_flags_of_settings_for((folder, tmp_path / "vocab.txt"), output, num_workers=2,
                                          documents_per_chunk=16)
        # A terminal's Ctrl-C reaches the whole process group: the program and its workers. (A
        # background job starts with SIGINT ignored, and Python then leaves it ignored.)
        process = subprocess.Popen(
            launched([sys.executable, "-m", "data_prep.create_pretraining_data", *flags]),
            cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        try:
            deadline = time.monotonic() + 120
            while not (output.parent.is_dir() and any(  # the shards' staging folder: work began
                    name.endswith(".partial") for name in os.listdir(output.parent))):
                self.assertLess(time.monotonic(), deadline)
                self.assertIsNone(process.poll())
                time.sleep(0.05)
            time.sleep(0.3)  # into the work: on an idle machine it all takes ~3 s
            os.killpg(process.pid, signal.SIGINT)
            stderr = process.communicate(timeout=120)[1]
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        self.assertEqual(process.returncode, 130, stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertNotIn("wrote", stderr)
        self.assertEqual(stderr.strip().splitlines()[-1], (
            "python -m data_prep.create_pretraining_data: interrupted (SIGINT); complete shards "
            "are kept; rerun the same command to resume"))
        self.assertEmpty([path for path in output.parent.iterdir()
                          if path.name.endswith(".partial")])

        rerun = run_cli(*flags)
        self.assertEqual(rerun.returncode, 0, rerun.stderr)
        self.assertLen(list(output.parent.glob("data-*-of-00003.tfrecord")), 3)

    def test_vocab_error_from_the_tokenizer_leaves_nothing(self):
        tmp_path, corpus = self._corpus()
        corpus[1].write_text("\n".join(token for token in VOCAB if token != "[MASK]"),
                             encoding="utf-8")
        with self.assertRaisesRegex(ValueError, r"lacks \[MASK\]"):
            create_pretraining_data(settings_for(corpus, tmp_path / "out" / "x.tfrecord"),
                                    io.StringIO())
        self.assertEmpty(list((tmp_path / "out").iterdir()))

    @parameterized.parameters((0.0, (0.8, 0.1, 0.1)), (0.15, (0.0, 0.5, 0.5)))
    def test_a_vocabulary_without_mask_serves_where_nothing_becomes_mask(self, masked_lm_prob,
                                                                          mask_ratios):
        tmp_path, corpus = self._corpus()
        corpus[1].write_text("\n".join(token for token in VOCAB if token != "[MASK]"),
                             encoding="utf-8")
        options = InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
                                  masked_lm_prob=masked_lm_prob, mask_ratios=mask_ratios)
        create_pretraining_data(settings_for(corpus, tmp_path / "out" / "x.tfrecord",
                                             options=options), io.StringIO())
        records = read_records(sorted((tmp_path / "out").glob("x-*-of-00003.tfrecord")))
        self.assertNotEmpty(records)
        self.assertEqual(sum(record["masked_lm_weights"].sum() for record in records) > 0,
                         masked_lm_prob > 0)

    def test_lines_many_sequences_long_are_counted_and_warned_about(self):
        tmp_path, corpus = self._corpus()
        folder, _ = corpus
        words = " ".join(random.Random(3).choice(VOCAB[5:]) for _ in range(400))
        (folder / "e.txt").write_text(f"{words}\nshort line .\n\n{words} {words}\n",
                                      encoding="utf-8")
        log = io.StringIO()
        summary = create_pretraining_data(settings_for(corpus, tmp_path / "out" / "x.tfrecord"),
                                          log)
        self.assertEqual(summary.long_lines, 2)
        self.assertIn("warning: 2 line(s) hold over 320 tokens (10 x max_seq_length); a line "
                      "is one sentence", log.getvalue())
        (folder / "e.txt").write_text(" ".join(words.split()[:320]) + "\n", encoding="utf-8")
        log = io.StringIO()
        self.assertEqual(create_pretraining_data(
            settings_for(corpus, tmp_path / "again" / "x.tfrecord"), log).long_lines, 0)
        self.assertNotIn("warning", log.getvalue())

    def test_index_splits_documents_at_blank_lines_as_str_strip_sees_them(self):
        # many blocks, lines cut across them
        self.enter_context(mock.patch.object(shards_lib, "_BLOCK_BYTES", 7))
        text = ("one two\r\nthree\r\n\r\n \u3000\t\nfour\n\xa0\n\u4e00\u4e8c\n\n\n\x1c\n"
                "five six seven\nlast")
        path = self.tmp_path() / "c.txt"
        path.write_bytes(text.encode("utf-8"))
        index = shards_lib.index_corpus([str(path)], documents_per_chunk=2)
        self.assertEqual([chunk.documents for chunk in index.chunks], [2, 2])
        documents = []
        for chunk in index.chunks:
            lines, starts = shards_lib.read_chunk_lines(chunk)
            documents += [lines[start:stop]
                          for start, stop in zip(starts, starts[1:] + [len(lines)])]
        self.assertEqual(documents, [["one two", "three"], ["four"], ["\u4e00\u4e8c"],
                                     ["five six seven", "last"]])

    @parameterized.parameters(True, False)
    def test_append_file_copies_the_rest_of_the_source_after_the_target(self, kernel_copy):
        if not kernel_copy:
            def unsupported(*args):
                raise OSError(18, "Invalid cross-device link")
            self.enter_context(mock.patch.object(os, "copy_file_range", unsupported))
        tmp_path = self.tmp_path()
        source, target = tmp_path / "staged", tmp_path / "shard"
        payload = bytes(random.Random(0).getrandbits(8) for _ in range(300_000))
        source.write_bytes(payload)
        with open(target, "wb") as shard:
            shard.write(b"head")
            shard.flush()
            with open(source, "rb") as staged:
                staged.seek(5)
                shards_lib.append_file(staged, shard)
            with open(source, "rb") as staged:
                shards_lib.append_file(staged, shard)
        self.assertEqual(target.read_bytes(), b"head" + payload[5:] + payload)

    def test_worker_preload_imports_tensorflow_and_leaves_sklearn_importable(self):
        check = ("import sys, data_prep.pretraining.worker_preload; "
                 "assert 'tensorflow' in sys.modules and 'sklearn' not in sys.modules; "
                 "import sklearn; print(sklearn.__name__)")
        result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True,
                                text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                                timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(result.stdout.strip(), "sklearn")


if __name__ == "__main__":
    tf.test.main()
