"""`fit(..., resume_dir=...)` killed at any point and called again ends with the same weights."""

import json
import os
import re
import subprocess
import sys
import textwrap
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.framework import CHECKPOINT_SAVE_STEPS
from core.run_folder import FolderOwned
from modeling import BertClassifier, TrainingDiverged
from tests.fixtures import REPO, TestCase
from tests.modeling.tiny_folder import tiny_folder
from training.example_order import ExampleOrder

TEXTS = ["a fine film", "a dull film", "great acting", "boring plot", "the film is great",
         "the plot was dull", "fine acting", "a boring film", "the cat sat"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0, 1]
# 9 examples in batches of 2: 5 steps an epoch (the last batch holds one), 15 in all.
CALL = {"batch_size": 2, "epochs": 3, "save_freq": 2, "verbose": 0}


class KillAt(keras.callbacks.Callback):
    """Ctrl-C after the training step `at` of this call (counted from 1)."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.steps = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == self.at:
            raise KeyboardInterrupt


def state(model: keras.Model) -> list[np.ndarray]:
    """Everything a step changes: the weights, the dropout seeds and the optimizer's slots."""
    return [np.array(v) for v in (*model.variables, *model.optimizer.variables)]


class FitResumeTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())
        cls._uninterrupted = None

    @property
    def uninterrupted(self) -> list[np.ndarray]:
        """The state an uninterrupted fit ends with, run once by the first test that needs it
        (the `long` ones; the one in `make test` compares processes)."""
        cls = type(self)
        if cls._uninterrupted is None:
            cls._uninterrupted = state(cls._fit(cls._model()))
        return cls._uninterrupted

    @classmethod
    def _model(cls, seed: int = 0) -> BertClassifier:
        keras.utils.set_random_seed(seed)
        model = BertClassifier.from_pretrained(cls.folder, num_labels=2, sequence_length=16)
        model.compile(learning_rate=1e-3)
        return model

    @classmethod
    def _fit(cls, model: BertClassifier, **arguments) -> BertClassifier:
        model.fit(TEXTS, LABELS, **{**CALL, **arguments})
        return model

    def assertSameState(self, expected: list, model: keras.Model):
        actual = state(model)
        self.assertLen(actual, len(expected))
        for want, got in zip(expected, actual):
            self.assertAllEqual(want, got)

    def assertUnlocked(self, folder: str):
        """Another process can take the folder: a fit holds it only while it runs."""
        taken = subprocess.run(
            [sys.executable, "-c", "import sys; from core import run_folder; "
             "run_folder.lock(sys.argv[1])", folder],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120, check=False)
        self.assertEqual(taken.returncode, 0, taken.stderr[-2000:])

    def _killed(self, resume_dir: str, at: int) -> None:
        with self.assertRaises(KeyboardInterrupt):
            self._fit(self._model(), resume_dir=resume_dir, callbacks=[KillAt(at)])

    @pytest.mark.long
    @pytest.mark.slow
    def test_killed_inside_an_epoch_then_rerun_ends_bit_identical(self):
        resume_dir = str(self.tmp_path())
        self._killed(resume_dir, at=9)  # saved at steps 2, 4, 5 (epoch end), 7; killed at 9
        self.assertEqual(tf.train.latest_checkpoint(resume_dir),
                         os.path.join(resume_dir, "ckpt-7"))
        # Another seed: every value the rerun ends with comes from the checkpoint and the run.
        resumed = self._model(seed=7)
        history = resumed.fit(TEXTS, LABELS, **CALL, resume_dir=resume_dir).history
        self.assertSameState(self.uninterrupted, resumed)
        self.assertLen(history["loss"], 2)  # the rest of epoch 2, then epoch 3

    @pytest.mark.long
    @pytest.mark.slow
    def test_a_kill_inside_a_save_leaves_the_previous_checkpoint(self):
        resume_dir = str(self.tmp_path())
        owner, name = CHECKPOINT_SAVE_STEPS["index"]
        update = getattr(owner, name)

        def update_or_stop(save_dir, model_checkpoint_path, *args, **kwargs):
            if os.path.basename(model_checkpoint_path) == "ckpt-7":
                raise KeyboardInterrupt  # ckpt-7 written, the index still naming ckpt-5
            return update(save_dir, model_checkpoint_path, *args, **kwargs)

        with mock.patch.object(owner, name, update_or_stop), \
                self.assertRaises(KeyboardInterrupt):
            self._fit(self._model(), resume_dir=resume_dir)
        self.assertEqual(tf.train.latest_checkpoint(resume_dir),
                         os.path.join(resume_dir, "ckpt-5"))
        # Resumed at the end of epoch 1.
        resumed = self._fit(self._model(seed=7), resume_dir=resume_dir)
        self.assertSameState(self.uninterrupted, resumed)
        self.assertEmpty([entry for entry in os.listdir(resume_dir)
                          if "_temp" in entry or ".tmp" in entry])
        # A finished run called again trains no more.
        again = self._model(seed=7)
        self.assertEqual(again.fit(TEXTS, LABELS, **CALL, resume_dir=resume_dir).epoch, [])
        self.assertSameState(self.uninterrupted, again)

    @pytest.mark.long
    @pytest.mark.slow
    def test_another_call_or_input_is_refused(self):
        resume_dir = str(self.tmp_path())
        self._killed(resume_dir, at=3)  # saved at step 2
        with self.assertRaisesRegex(FolderOwned, "batch_size=2.*batch_size=3"):
            self._model().fit(TEXTS, LABELS, **{**CALL, "batch_size": 3},
                              resume_dir=resume_dir)
        with self.assertRaisesRegex(FolderOwned, "examples_sha256="):
            self._model().fit(TEXTS, [1 - label for label in LABELS], **CALL,
                              resume_dir=resume_dir)
        keras.utils.set_random_seed(0)
        other_head = BertClassifier.from_pretrained(self.folder, num_labels=3,
                                                    sequence_length=16)
        other_head.compile(learning_rate=1e-3)
        with self.assertRaisesRegex(ValueError, f"^resume_dir={re.escape(resume_dir)} holds "
                                    f"{re.escape(os.path.join(resume_dir, 'ckpt-2'))}, which "
                                    "does not fit this model and optimizer .*; pass another "
                                    "resume_dir, or delete that folder to start over$"):
            other_head.fit(TEXTS, LABELS, **CALL, resume_dir=resume_dir)
        self.assertUnlocked(resume_dir)  # after a kill and after refusals
        packed = self._model().preprocessor(TEXTS)
        with self.assertRaisesRegex(ValueError, "^resume_dir needs x as raw text in Python "
                                    "lists or arrays, got a dict of packed inputs"):
            self._model().fit(packed, np.array(LABELS), resume_dir=resume_dir)
        for argument, value in (("resume_dir", ""), ("log_dir", 3)):
            with self.assertRaisesRegex(ValueError, f"^{argument} must be a folder path"):
                self._model().fit(TEXTS, LABELS, **{argument: value})
        with self.assertRaisesRegex(ValueError, "^save_freq must be a positive integer"):
            self._model().fit(TEXTS, LABELS, resume_dir=resume_dir, save_freq=0)

    def test_a_file_is_refused_as_a_folder_before_training(self):
        root = self.tmp_path()
        taken = root / "notes.txt"
        taken.write_text("kept")
        model = self._model()
        before = state(model)
        for argument, path, message in (
                ("resume_dir", taken, f"resume_dir='{taken}' is a file; pass a folder path"),
                ("resume_dir", taken / "run", f"resume_dir='{taken / 'run'}' lies under "
                                              f"'{taken}', which is a file; pass a folder"),
                ("log_dir", taken, f"log_dir='{taken}' is a file; pass a folder path")):
            with self.subTest(argument=argument, path=path), \
                    self.assertRaisesRegex(ValueError, "^" + re.escape(message)):
                model.fit(TEXTS, LABELS, **CALL, **{argument: path})
        self.assertSameState(before, model)
        self.assertEqual(taken.read_text(), "kept")
        self.assertEqual(os.listdir(root), ["notes.txt"])

    @pytest.mark.long
    @pytest.mark.slow
    def test_a_diverged_fit_saves_nothing_from_its_bad_step(self):
        resume_dir = str(self.tmp_path())
        model = self._model()
        model.compile(optimizer=keras.optimizers.SGD(1e38))
        with self.assertRaises(TrainingDiverged) as caught:
            model.fit(TEXTS, LABELS, **{**CALL, "save_freq": 1}, resume_dir=resume_dir)
        step = caught.exception.step
        self.assertEqual(caught.exception.last_good_checkpoint,
                         os.path.join(resume_dir, f"ckpt-{step - 1}") if step > 1 else None)
        self.assertEqual(tf.train.latest_checkpoint(resume_dir),
                         caught.exception.last_good_checkpoint)

    @pytest.mark.slow
    def test_a_sigkilled_fit_resumes_in_a_new_process(self):
        # Each pair of arguments after the data is one fit, run in order: its resume folder
        # ("-": none), then the step after which the process kills itself, or else the .npz
        # its end weights go to. The first process writes the uninterrupted run's weights,
        # then is killed inside a second run; the second process resumes that one.
        script = textwrap.dedent("""
            import json, os, signal, sys
            import keras, numpy as np
            from modeling import BertClassifier
            folder = sys.argv[1]
            texts, labels, call = json.loads(sys.argv[2])
            runs = sys.argv[3:]

            class Kill(keras.callbacks.Callback):
                def __init__(self, at):
                    super().__init__()
                    self.at, self.steps = at, 0

                def on_train_batch_end(self, batch, logs=None):
                    self.steps += 1
                    if self.steps == self.at:
                        os.kill(os.getpid(), signal.SIGKILL)

            for resume_dir, then in zip(runs[::2], runs[1::2]):
                keras.utils.set_random_seed(0)
                model = BertClassifier.from_pretrained(folder, num_labels=2, sequence_length=16)
                model.compile(learning_rate=1e-3)
                extra = {"resume_dir": resume_dir} if resume_dir != "-" else {}
                model.fit(texts, labels, **call, **extra,
                          callbacks=[Kill(int(then) if then.isdigit() else 0)])
                if not then.isdigit():
                    np.savez(then, *[np.array(v) for v in model.variables])
        """)
        root = str(self.tmp_path())
        environment = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
        data = json.dumps([TEXTS, LABELS, CALL])

        def run(*fits: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-c", script, str(self.folder), data, *fits],
                capture_output=True, text=True, env=environment, timeout=900, check=False)

        resume_dir = os.path.join(root, "resume")
        killed = run("-", os.path.join(root, "plain.npz"), resume_dir, "8")
        self.assertEqual(killed.returncode, -9, killed.stderr[-3000:])
        self.assertTrue(os.path.exists(os.path.join(root, "plain.npz")), killed.stderr[-3000:])
        resumed = run(resume_dir, os.path.join(root, "resumed.npz"))
        self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
        expected, actual = (np.load(os.path.join(root, name))
                            for name in ("plain.npz", "resumed.npz"))
        self.assertLen(actual.files, len(expected.files))
        for key in expected.files:
            self.assertAllEqual(expected[key], actual[key])


class ExampleOrderTest(TestCase):

    def test_each_batch_depends_on_the_seed_and_its_position_only(self):
        words = tf.ragged.constant([[row] * (row + 1) for row in range(5)])
        order = ExampleOrder((tf.range(5), words), count=5, batch_size=2, shuffle=True)
        self.assertEqual(order.batches_per_pass, 3)
        batches = list(order.batches(seed=3, start=0, stop=9))
        stream = [tuple(rows.numpy()) for rows, _ in batches]
        for rows, picked_words in batches:  # the columns' rows stay together
            self.assertEqual(picked_words.to_list(), [[row] * (row + 1) for row in rows.numpy()])
        for first in (0, 3, 6):  # a pass: every example once, the short batch last
            one_pass = stream[first:first + 3]
            self.assertCountEqual([row for rows in one_pass for row in rows], range(5))
            self.assertEqual([len(rows) for rows in one_pass], [2, 2, 1])
        self.assertNotEqual(stream[:3], stream[3:6])  # each pass draws its own order
        tail = [tuple(rows.numpy()) for rows, _ in order.batches(seed=3, start=4, stop=9)]
        self.assertEqual(tail, stream[4:])
        other = [tuple(rows.numpy()) for rows, _ in order.batches(seed=4, start=0, stop=9)]
        self.assertNotEqual(other, stream)
        unshuffled = ExampleOrder(tf.range(5), 5, 2, shuffle=False)
        self.assertEqual([list(rows.numpy()) for rows in unshuffled.batches(3, 2, 5)],
                         [[4], [0, 1], [2, 3]])

if __name__ == "__main__":
    tf.test.main()
