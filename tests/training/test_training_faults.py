"""Training under faults: divergence stops the run cleanly, kills resume bit for bit, leftovers go.

The kill tests run the real runner in a subprocess that SIGKILLs itself at a
chosen point (after a step, inside a checkpoint save, between a save and its
index update), then rerun the same command and compare the final variables
with an uninterrupted run's, dropout on.
"""

import contextlib
import errno
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from core.framework import OBJECT_GRAPH_KEY, seed_generator_states
from network.checkpoints import CheckpointError
from tests.fixtures import REPO, TestCase, launched, write_pretraining_records, write_tiny_config
from training import loop

pytestmark = pytest.mark.slow

PRETRAINING = os.path.join(REPO, "run_pretraining.py")

# Runs a runner script, sending it a signal (SIGKILL, SIGTERM, SIGINT) at `point` for step `at`:
#   step  - at the first loop end at or past that step, before it could be saved;
#   save  - inside the save of ckpt-<at>: shards written under ckpt-<at>_temp/, not merged;
#   index - ckpt-<at> written, the `checkpoint` index not yet pointing at it.
KILLER = """
import os, runpy, signal, sys
script, point, at, sent = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.argv = [script] + sys.argv[5:]
sys.path.insert(0, os.path.dirname(script))
# Ctrl-C as in a terminal, even when the tests run as a background job (SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)

def die():
    os.kill(os.getpid(), getattr(signal, sent))

if point == "step":
    from training import loop
    original = loop.CheckpointEvery.__call__
    def call(self, step, logs):
        if step >= at:
            die()
        original(self, step, logs)
    loop.CheckpointEvery.__call__ = call
elif point == "save":
    from core.framework import CHECKPOINT_SAVE_STEPS
    owner, name = CHECKPOINT_SAVE_STEPS[point]
    merge = getattr(owner, name)
    def merge_or_die(prefixes, destination, *args, **kwargs):
        if os.path.basename(destination.numpy().decode()) == f"ckpt-{at}":
            die()
        return merge(prefixes, destination, *args, **kwargs)
    setattr(owner, name, merge_or_die)
elif point == "index":
    from core.framework import CHECKPOINT_SAVE_STEPS
    owner, name = CHECKPOINT_SAVE_STEPS[point]
    update = getattr(owner, name)
    def update_or_die(save_dir, model_checkpoint_path, *args, **kwargs):
        if os.path.basename(model_checkpoint_path) == f"ckpt-{at}":
            die()
        return update(save_dir, model_checkpoint_path, *args, **kwargs)
    setattr(owner, name, update_or_die)
runpy.run_path(script, run_name="__main__")
"""


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder)
            if "_temp" in name or ".tmp" in name or name.endswith(".partial")]


def checkpoint_values(prefix) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != OBJECT_GRAPH_KEY}


def pretraining_arguments(inputs, output_dir, **flags) -> list[str]:
    records, config = inputs
    arguments = {"input_file": records, "bert_config_file": config, "output_dir": output_dir,
                 "do_train": True, "do_eval": True, "train_batch_size": 8,
                 "max_seq_length": 32, "max_predictions_per_seq": 5, "num_train_steps": 20,
                 "num_warmup_steps": 2, "learning_rate": 1e-3, "save_checkpoints_steps": 4,
                 "keep_checkpoint_max": 2, "log_every": 100, "max_eval_steps": 2}
    arguments.update(flags)
    return [f"--{key}={value}" for key, value in arguments.items()]


def run_pretraining(inputs, output_dir, file_size_limit=None, **flags):
    return subprocess.run(launched([sys.executable, PRETRAINING,
                                    *pretraining_arguments(inputs, output_dir, **flags)],
                                   file_size_limit),
                          capture_output=True, text=True, timeout=300)


def _write_inputs(folder: Path) -> tuple[str, str]:
    return (write_pretraining_records(folder / "train.tfrecord", 64),
            write_tiny_config(folder / "bert_config.json"))


class TinyRegression(keras.Model):
    """A dropout + dense model with the `checkpoint_variables` the TrainingLoop saves."""

    def __init__(self):
        super().__init__(name="tiny_regression")
        self.dropout = keras.layers.Dropout(0.1)
        self.dense = keras.layers.Dense(1)

    def call(self, features, training=None):
        return self.dense(self.dropout(features["x"], training=training))

    def checkpoint_variables(self) -> dict:
        return {"kernel": self.dense.kernel, "bias": self.dense.bias}


def _trainer(optimizer, folder, scale: float = 1.0, restore: bool = True,
             steps_per_update: int = 1):
    """A TrainingLoop of a freshly seeded TinyRegression in `folder`, restored unless
    `restore=False`."""
    keras.utils.set_random_seed(0)
    model = TinyRegression()
    model({"x": np.zeros((1, 4), "float32")})

    def loss_fn(features, outputs):
        return {"loss": tf.reduce_mean(tf.square(outputs[:, 0] - features["y"]))}

    trainer = loop.TrainingLoop(model, optimizer, tf.distribute.get_strategy(), loss_fn,
                           str(folder), max_to_keep=1, steps_per_update=steps_per_update)
    if restore:
        trainer.restore_newest_checkpoint()
    rng = np.random.default_rng(0)
    data = tf.data.Dataset.from_tensor_slices(
        {"x": rng.normal(size=(32, 4)).astype("float32"),
         "y": (scale * rng.normal(size=32)).astype("float32")}).repeat().batch(8)
    return trainer, model, data


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Lowers this process' file-size limit (ulimit -f) for the block: writes past it fail."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def run_killed(script: str, point: str, at: int, arguments: list[str],
               sent: str = "SIGKILL") -> subprocess.CompletedProcess:
    """Runs `script` with `arguments`, sent signal `sent` at `point` of step `at` (KILLER).

    SIGKILL ends it at once; SIGINT and SIGTERM must end it with one line and the shell's
    exit status for the signal.
    """
    result = subprocess.run([sys.executable, "-c", KILLER, script, point, str(at), sent,
                             *arguments], capture_output=True, text=True, timeout=300, cwd=REPO)
    number = getattr(signal, sent)
    expected = -number if number == signal.SIGKILL else 128 + number
    if result.returncode != expected:
        raise AssertionError(f"not stopped at {point} {at} (exit {result.returncode}): "
                             f"{result.stderr[-3000:]}")
    if number != signal.SIGKILL and "Traceback" in result.stderr:
        raise AssertionError(f"a traceback after {sent}: {result.stderr[-3000:]}")
    return result


class _FaultsTestCase(TestCase, parameterized.TestCase):
    """The runs' shared checks, and the records and config every pre-training run reads."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.inputs = _write_inputs(cls.root)

    def assert_finite_checkpoints(self, folder) -> list[str]:
        prefixes = sorted({name.rsplit(".", 1)[0] for name in os.listdir(folder)
                           if re.fullmatch(r"ckpt-\d+\.index", name)})
        self.assertNotEmpty(prefixes, f"no checkpoint in {folder}")
        for prefix in prefixes:
            for name, value in checkpoint_values(os.path.join(folder, prefix)).items():
                if np.issubdtype(value.dtype, np.floating):
                    self.assertTrue(np.isfinite(value).all(), f"{prefix}: {name} is not finite")
        return prefixes

    def assert_same_final_run(self, reference, resumed):
        expected, actual = checkpoint_values(reference / "ckpt-20"), checkpoint_values(
            resumed / "ckpt-20")
        self.assertEqual(expected.keys(), actual.keys())
        differing = [name for name in expected
                     if not np.array_equal(expected[name], actual[name])]
        self.assertEmpty(differing,
                         f"{len(differing)} of {len(expected)} differ: {differing[:5]}")
        self.assertEqual((reference / "eval_results.txt").read_text(),
                         (resumed / "eval_results.txt").read_text())
        self.assertEmpty(leftovers(resumed))


@pytest.mark.long
class DivergenceTest(_FaultsTestCase):

    def test_absurd_learning_rate_stops_with_the_step_and_last_good_checkpoint(self):
        tmp_path = self.tmp_path()
        result = run_pretraining(self.inputs, tmp_path, learning_rate=1e6,
                                 save_checkpoints_steps=2)
        self.assertEqual(result.returncode, 1, result.stderr[-3000:])
        error = result.stderr.strip().splitlines()[-1]
        match = re.fullmatch(r"run_pretraining\.py: error: training diverged at step (\d+): "
                             r"loss=\S+(, non-finite gradients)?; the last good checkpoint, "
                             r"(\S+), is kept .*", error)
        self.assertIsNotNone(match, error)
        step, named = int(match.group(1)), match.group(3)
        self.assertBetween(step, 3, 19)
        # The newest checkpoint is the one named, from before the divergence, and all are finite.
        self.assertEqual(tf.train.latest_checkpoint(str(tmp_path)), named)
        self.assertLess(int(named.rsplit("-", 1)[1]), step)
        self.assert_finite_checkpoints(tmp_path)
        self.assertFalse((tmp_path / "eval_results.txt").exists())
        self.assertFalse((tmp_path / "export").exists())

    def test_resuming_with_absurd_rate_keeps_the_good_checkpoint(self):
        tmp_path = self.tmp_path()
        good = run_pretraining(self.inputs, tmp_path, num_train_steps=4, keep_checkpoint_max=1,
                               do_eval=False)
        self.assertEqual(good.returncode, 0, good.stderr[-3000:])
        self.assertEndsWith(tf.train.latest_checkpoint(str(tmp_path)), "ckpt-4")
        good_values = checkpoint_values(tmp_path / "ckpt-4")

        bad = run_pretraining(self.inputs, tmp_path, num_train_steps=40, keep_checkpoint_max=1,
                              learning_rate=1e6, save_checkpoints_steps=1, do_eval=False)
        self.assertEqual(bad.returncode, 1, bad.stderr[-3000:])
        self.assertIn("Resuming from", bad.stderr)
        self.assertIn("training diverged at step", bad.stderr)
        kept = tf.train.latest_checkpoint(str(tmp_path))
        self.assertIn(f"the last good checkpoint, {kept}, is kept", bad.stderr)
        self.assertEqual(self.assert_finite_checkpoints(tmp_path), [os.path.basename(kept)])
        if kept.endswith("ckpt-4"):  # diverged on its first step: the checkpoint is untouched
            for name, value in checkpoint_values(kept).items():
                self.assertAllEqual(good_values[name], value, msg=name)

    def test_two_workers_stop_together_at_the_same_step(self):
        tmp_path = self.tmp_path()
        ports = []
        for _ in range(2):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                ports.append(f"127.0.0.1:{probe.getsockname()[1]}")
        command = [sys.executable, PRETRAINING, *pretraining_arguments(
            self.inputs, tmp_path, learning_rate=1e6, save_checkpoints_steps=2,
            iterations_per_loop=3, do_eval=False, distribution_strategy="multi_worker_mirrored")]
        processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, env=dict(os.environ, TF_CONFIG=json.dumps(
                                          {"cluster": {"worker": ports},
                                           "task": {"type": "worker", "index": index}})))
                     for index in range(2)]
        try:  # a worker that went on alone would wait in its all-reduce until killed here
            errors = [process.communicate(timeout=300)[1] for process in processes]
        finally:
            for process in processes:
                process.kill()
        self.assertEqual([process.returncode for process in processes], [1, 1],
                         errors[0][-3000:])
        # The runner's own error line; a worker whose peer has already exited may log a
        # connection error after it, from TensorFlow's shutdown.
        lines = [next((line for line in reversed(error.splitlines())
                       if line.startswith("run_pretraining.py: error:")), error[-3000:])
                 for error in errors]
        self.assertEqual(lines[0], lines[1])
        self.assertIn("training diverged at step", lines[0])
        latest = tf.train.latest_checkpoint(str(tmp_path))
        self.assertTrue(latest, lines)
        self.assertIn(f"the last good checkpoint, {latest}, is kept", lines[0])
        self.assert_finite_checkpoints(tmp_path)


@pytest.mark.long
class ResumeAfterFaultsTest(_FaultsTestCase):
    """Reruns compared with one uninterrupted reference run, made once for the class."""

    @classmethod
    def setUpClass(cls):
        """An uninterrupted run with `pretraining_arguments`' defaults, to compare reruns with."""
        super().setUpClass()
        cls.reference = cls.root / "reference"
        result = run_pretraining(cls.inputs, cls.reference)
        if result.returncode != 0:
            raise RuntimeError(f"the reference run failed: {result.stderr[-3000:]}")

    def test_kills_and_signals_anywhere_then_rerun_end_bit_identical_with_dropout(self):
        resumed = self.tmp_path() / "resumed"
        arguments = pretraining_arguments(self.inputs, resumed)
        run_killed(PRETRAINING, "save", 8, arguments)  # dies saving 8, after ckpt-4
        self.assertTrue((resumed / "ckpt-8_temp").is_dir())
        self.assertFalse((resumed / "ckpt-8.index").exists())
        self.assertEndsWith(tf.train.latest_checkpoint(str(resumed)), "ckpt-4")
        # Resumes at 4 (removing the dead save's leftovers), saves 8; SIGTERM while saving 12.
        stopped = run_killed(PRETRAINING, "save", 12, arguments, "SIGTERM")
        self.assertEqual(last_line(stopped.stderr), (
            f"run_pretraining.py: interrupted (SIGTERM); the newest checkpoint is "
            f"{resumed}/ckpt-8; rerun the same command to resume"))
        self.assertEmpty(leftovers(resumed), "the interrupted save left its temporary files")
        # Resumes at 8, saves 12; Ctrl-C mid-interval.
        stopped = run_killed(PRETRAINING, "step", 14, arguments, "SIGINT")
        self.assertEqual(last_line(stopped.stderr), (
            f"run_pretraining.py: interrupted (SIGINT); the newest checkpoint is "
            f"{resumed}/ckpt-12; rerun the same command to resume"))
        # resumes at 12; 16 written, unlisted
        run_killed(PRETRAINING, "index", 16, arguments)
        self.assertTrue((resumed / "ckpt-16.index").exists())
        self.assertEndsWith(tf.train.latest_checkpoint(str(resumed)), "ckpt-12")
        final = subprocess.run([sys.executable, PRETRAINING, *arguments], capture_output=True,
                               text=True, timeout=300)
        self.assertEqual(final.returncode, 0, final.stderr[-3000:])
        self.assertRegex(final.stderr, r"Resuming from .*ckpt-12 at step 12")
        self.assert_same_final_run(self.reference, resumed)

    def test_a_file_size_limit_during_a_save_ends_in_one_line_and_a_rerun_ends_identical(self):
        tmp_path = self.tmp_path()

        # Below a checkpoint's data file (~300 KB), above everything else.
        limited = run_pretraining(self.inputs, tmp_path, file_size_limit=100_000)
        self.assertEqual(limited.returncode, 1, limited.stderr[-3000:])
        self.assertNotIn("Traceback", limited.stderr, limited.stderr[-3000:])
        self.assertEqual(last_line(limited.stderr), (
            f"run_pretraining.py: error: cannot write {tmp_path}/ckpt-4: the file would exceed "
            "this process' file-size limit (ulimit -f); no checkpoint was saved yet; make room "
            "(or raise the limit), then rerun the same command to resume"))
        self.assertEmpty(leftovers(tmp_path))
        self.assertIsNone(tf.train.latest_checkpoint(str(tmp_path)))

        rerun = run_pretraining(self.inputs, tmp_path)
        self.assertEqual(rerun.returncode, 0, rerun.stderr[-3000:])
        self.assert_same_final_run(self.reference, tmp_path)


class TrainerFaultsTest(_FaultsTestCase):
    """The TrainingLoop in this process, on a tiny regression model."""

    def test_divergence_inside_a_loop_call_stops_there_and_saves_nothing(self):
        tmp_path = self.tmp_path()
        trainer, _, data = _trainer(keras.optimizers.SGD(learning_rate=1e30), tmp_path)
        with self.assertRaises(loop.TrainingDiverged) as raised:
            trainer.train(data, 10, steps_per_loop=1,
                          callbacks=[loop.CheckpointEvery(trainer, 1, 10)])
        # Step 1's update is finite but huge; step 2's loss overflows.
        self.assertEqual(raised.exception.step, 2)
        self.assertEqual(trainer.step, 2)
        self.assertEqual(raised.exception.last_good_checkpoint,
                         os.path.join(str(tmp_path), "ckpt-1"))
        self.assertEndsWith(tf.train.latest_checkpoint(str(tmp_path)), "ckpt-1")
        self.assertFalse((tmp_path / "ckpt-2.index").exists())

        # Inside one compiled call of 5 steps, it stops after step 2 too.
        trainer, _, data = _trainer(keras.optimizers.SGD(learning_rate=1e30), tmp_path / "loop")
        with self.assertRaisesRegex(loop.TrainingDiverged,
                                    "no checkpoint was written") as raised:
            trainer.train(data, 10, steps_per_loop=5)
        self.assertEqual(raised.exception.step, 2)
        self.assertEqual(trainer.step, 2)

    def test_divergence_is_numbered_in_updates_of_steps_per_update_batches(self):
        trainer, _, data = _trainer(keras.optimizers.SGD(learning_rate=1e30), self.tmp_path(),
                                    steps_per_update=2)
        with self.assertRaisesRegex(loop.TrainingDiverged, "^training diverged at step 1:"):
            trainer.train(data, 10, steps_per_loop=5)
        self.assertEqual(trainer.step, 2)  # batch 2 of update 1 overflowed
        for bad in (0, -2, 1.5, True, "2"):
            with self.assertRaisesRegex(ValueError, "^steps_per_update must be a positive "
                                        rf"integer, got {re.escape(repr(bad))}$"):
                _trainer(keras.optimizers.SGD(learning_rate=0.01), self.tmp_path(),
                         steps_per_update=bad)

    def test_save_refuses_non_finite_values(self):
        tmp_path = self.tmp_path()
        trainer, model, _ = _trainer(keras.optimizers.SGD(learning_rate=0.1), tmp_path)
        trainer.save()
        model.dense.bias.assign([np.nan])
        with self.assertRaisesRegex(loop.TrainingDiverged, "non-finite values"):
            trainer.save()
        self.assertEqual(os.path.basename(tf.train.latest_checkpoint(str(tmp_path))), "ckpt-0")
        self.assert_finite_checkpoints(tmp_path)

    def test_loss_scaling_overflow_steps_are_skipped_not_divergence(self):
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.01),
                                                        initial_scale=2.0 ** 127)
        trainer, model, data = _trainer(optimizer, self.tmp_path(), scale=1000.0)
        before = model.dense.kernel.numpy().copy()
        trainer.train(data, 30, steps_per_loop=3)
        self.assertEqual(trainer.step, 30)
        # The scaled gradients overflowed at first (so the scale came down) and training went on.
        self.assertLess(float(optimizer.dynamic_scale), 2.0 ** 120)
        self.assertTrue(np.isfinite(model.dense.kernel.numpy()).all())
        self.assertFalse(np.array_equal(before, model.dense.kernel.numpy()))

    def test_dropout_random_state_is_in_the_training_checkpoint(self):
        tmp_path = self.tmp_path()
        trainer, model, data = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        states = seed_generator_states(model)
        self.assertLen(states, 1)
        trainer.train(data, 3)
        trainer.save()
        drawn = states[0].numpy().copy()

        fresh, fresh_model, _ = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        self.assertEqual(fresh.step, 3)
        self.assertAllEqual(seed_generator_states(fresh_model)[0].numpy(), drawn)

    def test_start_removes_only_a_dead_saves_temporary_files(self):
        tmp_path = self.tmp_path()
        (tmp_path / "ckpt-7_temp").mkdir()
        (tmp_path / "ckpt-7_temp" / "part-00000-of-00001.index").write_text("partial")
        (tmp_path / f"checkpoint.tmp{'0123456789abcdef' * 2}").write_text("partial")
        kept = ["ckpt-7_temp.notes", "checkpoint.tmp-mine", "ckpt-3.index", "my_temp"]
        for name in kept:
            (tmp_path / name).write_text("not ours")
        _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        self.assertEqual(sorted(os.listdir(tmp_path)), sorted(kept))

    def test_restoring_is_a_step_of_its_own_that_comes_before_training_and_saving(self):
        tmp_path = self.tmp_path()
        trainer, model, data = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        self.assertIsNone(trainer.restored_from)
        trainer.train(data, 3)
        trainer.save()
        trained = model.dense.kernel.numpy().copy()

        later, later_model, _ = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path,
                                         restore=False)
        self.assertEqual(later.step, 0)  # construction read no checkpoint
        self.assertNotAllClose(later_model.dense.kernel.numpy(), trained)
        for name, use in (("train", lambda: later.train(data, 4)), ("save", later.save),
                          ("restored_from", lambda: later.restored_from)):
            with self.assertRaisesRegex(RuntimeError, f"^TrainingLoop.{name} was used before "
                                        r"restore_newest_checkpoint\(\)"):
                use()
        self.assertEqual(later.step, 0)
        self.assertEndsWith(tf.train.latest_checkpoint(str(tmp_path)), "ckpt-3")

        self.assertEqual(later.restore_newest_checkpoint(), str(tmp_path / "ckpt-3"))
        self.assertEqual(later.restored_from, str(tmp_path / "ckpt-3"))
        self.assertEqual(later.step, 3)
        self.assertAllEqual(later_model.dense.kernel.numpy(), trained)
        with self.assertRaisesRegex(RuntimeError, "already called"):
            later.restore_newest_checkpoint()

    def test_checkpoint_without_dropout_state_still_resumes(self):
        """Checkpoints written before the dropout state was saved resume, with fresh masks."""
        from network.checkpoints import training_checkpoint

        tmp_path = self.tmp_path()
        trainer, model, data = _trainer(keras.optimizers.SGD(learning_rate=0.01),
                                        tmp_path / "new")
        trainer.train(data, 3)
        old_style = training_checkpoint(model, optimizer=trainer.optimizer,
                                        step=trainer.step_counter)
        tf.train.CheckpointManager(old_style, str(tmp_path / "old"), max_to_keep=1).save(3)
        trained = model.dense.kernel.numpy().copy()

        resumed, resumed_model, _ = _trainer(keras.optimizers.SGD(learning_rate=0.01),
                                             tmp_path / "old")
        self.assertEqual(resumed.step, 3)
        self.assertAllEqual(resumed_model.dense.kernel.numpy(), trained)

    def test_a_save_without_room_names_the_checkpoint_and_leaves_no_temporary(self):
        tmp_path = self.tmp_path()
        trainer, _, data = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        trainer.train(data, 2)
        trainer.save()
        trainer.train(data, 4)
        with file_size_limit(64), self.assertRaises(OSError) as raised:
            trainer.save()
        self.assertEqual((raised.exception.errno, raised.exception.filename),
                         (errno.EFBIG, str(tmp_path / "ckpt-4")))
        self.assertEqual(sorted(os.listdir(tmp_path)), ["checkpoint", "ckpt-2.data-00000-of-00001",
                                                        "ckpt-2.index"])
        trainer.save()  # with room again
        self.assertEndsWith(tf.train.latest_checkpoint(str(tmp_path)), "ckpt-4")

    @parameterized.parameters("cut", "flipped byte")
    def test_resuming_from_a_damaged_checkpoint_names_its_data_file(self, damage):
        tmp_path = self.tmp_path()
        trainer, _, data = _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)
        trainer.train(data, 2)
        trainer.save()
        data_file = tmp_path / "ckpt-2.data-00000-of-00001"
        if damage == "cut":
            os.truncate(data_file, 300)
            expected = f"^{re.escape(str(data_file))} is cut short: it ends at byte 300, before"
        else:
            content = bytearray(data_file.read_bytes())
            content[40] ^= 0xFF
            data_file.write_bytes(content)
            expected = (f"^damaged data in {re.escape(str(data_file))} \\({len(content)} "
                        "bytes\\); TensorFlow: .*Checksum does not match")
        with self.assertRaisesRegex(CheckpointError, expected):
            _trainer(keras.optimizers.SGD(learning_rate=0.01), tmp_path)


if __name__ == "__main__":
    tf.test.main()
