"""run_pretraining.py end to end: objectives, outputs, resume after SIGKILL, replicas, workers."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from absl.testing import parameterized

from evaluation.results import read_eval_results
from tests.fixtures import REPO, TestCase, run_main, write_pretraining_records, write_tiny_config
from tests.runners.shared_runs import run_logged
from tests.training.test_input_pipeline import record_offsets

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(REPO, "run_pretraining.py")


def _arguments(inputs, output_dir, **flags) -> dict:
    records, config = inputs
    arguments = {"input_file": records, "bert_config_file": config, "output_dir": output_dir,
                 "do_train": True, "do_eval": True, "train_batch_size": 8,
                 "max_seq_length": 32, "max_predictions_per_seq": 5, "num_train_steps": 6,
                 "num_warmup_steps": 2, "learning_rate": 1e-3, "save_checkpoints_steps": 2,
                 "log_every": 2, "max_eval_steps": 2}
    arguments.update(flags)
    return arguments


def _command(inputs, output_dir, **flags):
    arguments = _arguments(inputs, output_dir, **flags)
    return [sys.executable, SCRIPT] + [f"--{key}={value}" for key, value in arguments.items()]


def _run(inputs, output_dir, **flags):
    result = subprocess.run(_command(inputs, output_dir, **flags), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _newest_checkpoint_step(folder) -> int:
    steps = [int(match.group(1)) for path in folder.glob("ckpt-*.index")
             if (match := re.fullmatch(r"ckpt-(\d+)\.index", path.name))]
    return max(steps, default=0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RunPretrainingTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """The records and config every run reads, written once."""
        super().setUpClass()
        folder = cls.class_folder()
        cls.inputs = (write_pretraining_records(folder / "train.tfrecord", 96),
                      write_tiny_config(folder / "bert_config.json"))

    @parameterized.parameters(("mlm", "masked_lm_accuracy"), ("ltr", "lm_accuracy"))
    @pytest.mark.long
    def test_ablation_objectives(self, objective, key):
        tmp_path = self.tmp_path()
        records = self.inputs[0] if objective != "ltr" else write_pretraining_records(
            tmp_path / "unmasked.tfrecord", 96, masked=False)  # as --masked_lm_prob=0 writes them
        run_main("run_pretraining.py", _arguments(
            self.inputs, tmp_path / "out", objective=objective, gradient_accumulation_steps=2,
            num_train_steps=3, input_file=records))
        results = read_eval_results(tmp_path / "out" / "eval_results.txt")
        self.assertIn(key, results)
        self.assertNotIn("next_sentence_accuracy", results)
        self.assertEqual(results["global_step"], 3)

    @parameterized.parameters(
        ({"dtype": "mixed_float16"}, False),
        ({"dtype": "mixed_bfloat16", "jit_compile": True}, True),
        ({"optimizer": "lamb", "iterations_per_loop": 3, "jit_compile": False}, False))
    @pytest.mark.long
    def test_precisions_xla_and_lamb(self, flags, compiled):
        tmp_path = self.tmp_path()
        result = _run(self.inputs, tmp_path, num_train_steps=3, **flags)
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertEqual(results["global_step"], 3)
        self.assertLess(results["masked_lm_loss"], 10)
        self.assertIn(f"Training step compiled with XLA: {compiled}", result.stderr)

    def test_resumes_after_sigkill_then_evaluates_and_writes_everything(self):
        """A run killed between checkpoints resumes in a new run, which ends as any run does.

        The second run, in this process, is the one whose outputs are checked:
        results, progress lines, the export, TensorBoard's events.
        """
        tmp_path, steps = self.tmp_path(), 100
        process = subprocess.Popen(_command(self.inputs, tmp_path, num_train_steps=steps,
                                            save_checkpoints_steps=3, do_eval=False),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 240
        # Any checkpoint from step 6 on: only the newest five are kept, so a given
        # one may come and go between two looks.
        while _newest_checkpoint_step(tmp_path) < 6:
            self.assertIsNone(process.poll(), "training ended before it could be killed")
            self.assertLess(time.monotonic(), deadline, "no checkpoint appeared")
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.assertFalse((tmp_path / f"ckpt-{steps}.index").exists())
        # What a run killed while writing its results or its export leaves behind.
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        leftovers = [tmp_path / f".eval_results.txt.{child.pid}-0123abcd.partial",
                     tmp_path / "export" / f".bert_model.ckpt.{child.pid}-0123abcd.partial"]
        leftovers[1].mkdir(parents=True)
        leftovers[0].write_text("half")

        log = run_logged("run_pretraining.py", _arguments(
            self.inputs, tmp_path, num_train_steps=steps, save_checkpoints_steps=100)).stderr
        self.assertRegex(log, r"Resuming from .*ckpt-\d+ at step [1-9]")
        self.assertTrue((tmp_path / f"ckpt-{steps}.index").exists())
        for path in leftovers:
            self.assertFalse(path.exists(), path)
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertContainsSubset({"masked_lm_accuracy", "masked_lm_loss",
                                   "next_sentence_accuracy", "next_sentence_loss", "global_step",
                                   "perplexity"}, set(results))
        self.assertEqual(results["global_step"], steps)
        self.assertRegex(log, rf"step {steps}/{steps} .* steps/s .* examples/s .*loss=.* ETA")
        # A small model on one CPU in float32: XLA is the faster path, and the default.
        self.assertIn("Training step compiled with XLA: True", log)
        self.assertTrue((tmp_path / "export" / "bert_model.ckpt.index").exists())
        self.assertEqual(json.loads((tmp_path / "bert_config.json").read_text())["hidden_size"],
                         32)
        self.assertTrue(any(name.startswith("events")
                            for name in os.listdir(tmp_path / "logs" / "train")))

        from network.checkpoints import load_weights
        from network.config import BertConfig
        from modeling.pretrainer import BertPretrainer

        model = BertPretrainer(BertConfig.from_json_file(tmp_path / "bert_config.json"))
        report = load_weights(model, tmp_path / "export" / "bert_model.ckpt")
        self.assertEmpty(report.missing)
        self.assertEmpty(report.unexpected)

    @pytest.mark.long  # the loop itself is mirrored in make test (test_distribution)
    def test_mirrored_over_two_cpu_replicas(self):
        tmp_path = self.tmp_path()
        _run(self.inputs, tmp_path, distribution_strategy="mirrored", cpu_replicas=2,
             num_train_steps=2, max_eval_steps=1)
        self.assertEqual(read_eval_results(tmp_path / "eval_results.txt")["global_step"], 2)

    @pytest.mark.long
    def test_two_workers_train_in_lockstep(self):
        tmp_path = self.tmp_path()
        workers = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
        processes = []
        for index in range(2):
            environment = dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
            processes.append(subprocess.Popen(
                _command(self.inputs, tmp_path, distribution_strategy="multi_worker_mirrored",
                         num_train_steps=4),
                env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs = [process.communicate(timeout=300)[0] for process in processes]
        for process, output in zip(processes, outputs):
            self.assertEqual(process.returncode, 0, output[-3000:])
        checksums = [re.search(r"final weights checksum: ([\d.]+)", output).group(1)
                     for output in outputs]
        self.assertEqual(checksums[0], checksums[1])
        self.assertEqual(read_eval_results(tmp_path / "eval_results.txt")["global_step"], 4)
        self.assertEmpty([name for name in os.listdir(tmp_path) if name.startswith(".worker")])

    @parameterized.parameters(
        ({"input_file": "/nonexistent/*.tfrecord"}, "no input file matches"),
        ({"max_seq_length": 16}, "max_seq_length"),
        ({"train_batch_size": 6, "gradient_accumulation_steps": 4}, "not divisible"),
        ({"do_train": False, "do_eval": False}, "at least one of"),
        ({"output_dir": "/dev/null/out"}, "--output_dir=/dev/null/out: cannot write there"),
    )
    def test_bad_inputs(self, flags, message):
        flags = {"output_dir": self.tmp_path() / "out", **flags}
        with self.assertRaisesRegex((ValueError, OSError), re.escape(message)):
            run_main("run_pretraining.py", _arguments(self.inputs, **flags))

    def test_truncated_records_are_named_before_training(self):
        tmp_path = self.tmp_path()
        records, config = self.inputs
        data = open(records, "rb").read()
        cut = tmp_path / "data" / "train-cut.tfrecord"
        cut.parent.mkdir()
        cut.write_bytes(data[:record_offsets(data)[48] + 20])  # 48 whole records, part of one
        (tmp_path / "data" / ".train-cut.tfrecord.complete.json").write_text("{}")  # skipped
        with self.assertRaises(ValueError) as refused:
            run_main("run_pretraining.py",
                     _arguments((str(tmp_path / "data" / "*"), config), tmp_path / "out"))
        self.assertRegex(str(refused.exception),
                         rf"^{re.escape(str(cut))}: truncated record at byte \d+: it needs \d+ "
                         r"bytes, the file ends after \d+ .*\Z")
        self.assertFalse(os.path.exists(tmp_path / "out" / "checkpoint"))

    def test_a_damaged_record_met_in_training_is_named_with_its_offset(self):
        tmp_path = self.tmp_path()
        records, config = self.inputs
        data = bytearray(open(records, "rb").read())
        offset = record_offsets(bytes(data))[50]
        data[offset + 30] ^= 0xFF  # the framing stays intact: only reading finds it
        damaged = tmp_path / "damaged.tfrecord"
        damaged.write_bytes(bytes(data))
        with self.assertRaisesRegex(ValueError, re.escape(
                f"{damaged}: corrupted record at byte {offset} (its checksum does not match)")):
            run_main("run_pretraining.py", _arguments((damaged, config), tmp_path / "out"))

    def test_records_with_ids_past_the_vocabulary_stop_the_run_naming_them(self):
        """Under XLA an out-of-range id would be clamped to the table's last row, silently."""
        tmp_path = self.tmp_path()
        records, _ = self.inputs
        # records: up to 63
        small = write_tiny_config(tmp_path / "small_config.json", vocab_size=40)
        with self.assertRaises(ValueError) as refused:
            # The check is tf.data's, before any step: no XLA program needed to meet it.
            run_main("run_pretraining.py", _arguments((records, small), tmp_path / "out",
                                                      jit_compile=False))
        self.assertRegex(str(refused.exception),
                         rf"^{re.escape(str(records))}: a record holds token id "
                         rf"(4\d|5\d|6[0-3]), outside the vocabulary of "
                         rf"{re.escape(str(small))} \(vocab_size=40\); .*\Z")
        self.assertFalse(os.path.exists(tmp_path / "out" / "checkpoint"))

    def test_a_vocabulary_larger_than_the_config_is_refused(self):
        tmp_path = self.tmp_path()
        vocab = tmp_path / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                   + [f"token{i}" for i in range(60)]) + "\n")
        with self.assertRaisesRegex(ValueError, re.escape(
                f"{vocab} holds 65 tokens, more than vocab_size=64 of {self.inputs[1]}")):
            run_main("run_pretraining.py", _arguments(self.inputs, tmp_path / "out",
                                                      vocab_file=vocab))
        self.assertFalse(os.path.exists(tmp_path / "out" / "checkpoint"))

    @pytest.mark.long
    def test_a_second_run_into_a_live_runs_folder_is_refused_and_the_first_finishes(self):
        from absl import flags

        import run_pretraining
        from cli import runner_flags
        from core import run_folder
        from network.config import BertConfig

        tmp_path = self.tmp_path()
        first = subprocess.Popen(_command(self.inputs, tmp_path, num_train_steps=60,
                                          do_eval=False),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lock = tmp_path / run_folder.LOCK_NAME
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text()):
            self.assertIsNone(first.poll(), "the first run ended before it held its folder")
            self.assertLess(time.monotonic(), deadline, "the first run never locked its folder")
            time.sleep(0.05)
        values = flags.FlagValues()
        run_pretraining.define_flags(values)
        values(["run_pretraining.py", *_command(self.inputs, tmp_path)[2:]])
        model_files, training, *_ = runner_flags.training_configs(values,
                                                                  run_pretraining.REQUIRED)
        with self.assertRaisesRegex(run_folder.FolderInUse,
                                    f"^{tmp_path} is in use by another run "
                                    f"\\(PID {first.pid} on "):
            runner_flags.start_run(values, training, "pretraining:mlm_nsp",
                                   BertConfig.from_json_file(model_files.bert_config_file))
        self.assertEqual(first.wait(timeout=300), 0, first.stderr.read()[-3000:])
        self.assertEqual(_newest_checkpoint_step(tmp_path), 60)
        self.assertEqual(json.loads((tmp_path / run_folder.OWNER_NAME).read_text())["task"],
                         "pretraining:mlm_nsp")


if __name__ == "__main__":
    tf.test.main()
