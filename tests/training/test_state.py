"""The one checkpointed training state: restored whole, saved only when finite, leftovers gone.

The runners' loop and `fit` both keep their run in a `TrainingState`; their
own tests (test_training_faults.py, test_resume.py) train through it, these
check the state alone on a tiny model.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from tests.fixtures import TestCase
from training.divergence import TrainingDiverged
from training.state import TrainingState


class Tiny(keras.Model):
    """A dense layer and a dropout, with the `checkpoint_variables` a state saves."""

    def __init__(self):
        super().__init__()
        self.dropout = keras.layers.Dropout(0.1)
        self.dense = keras.layers.Dense(2)

    def call(self, x, training=None):
        return self.dense(self.dropout(x, training=training))

    def checkpoint_variables(self) -> dict:
        return {"kernel": self.dense.kernel, "bias": self.dense.bias}


def _state(folder, seed: int = 0, **kwargs) -> tuple[TrainingState, Tiny, keras.optimizers.Adam]:
    keras.utils.set_random_seed(seed)
    model = Tiny()
    model(np.zeros((1, 3), np.float32))
    optimizer = keras.optimizers.Adam(0.1)
    optimizer.build(model.trainable_variables)
    return TrainingState(str(folder), model, optimizer, **kwargs), model, optimizer


class TrainingStateTest(TestCase):

    def test_a_saved_state_restores_weights_optimizer_step_and_extras(self):
        folder = self.tmp_path()
        seed = tf.Variable(0, dtype=tf.int64)
        state, model, optimizer = _state(folder, extra={"order_seed": seed})
        self.assertIsNone(state.restore())
        optimizer.apply_gradients([(tf.ones_like(v), v) for v in model.trainable_variables])
        seed.assign(17)
        self.assertEqual(state.save(5), os.path.join(str(folder), "ckpt-5"))

        other_seed = tf.Variable(0, dtype=tf.int64)
        again, other, other_optimizer = _state(folder, seed=1, extra={"order_seed": other_seed})
        self.assertEqual(again.restore(), os.path.join(str(folder), "ckpt-5"))
        self.assertEqual(int(again.step.numpy()), 5)
        self.assertEqual(int(other_seed.numpy()), 17)
        self.assertAllEqual(other.dense.kernel.numpy(), model.dense.kernel.numpy())
        self.assertEqual(int(other_optimizer.iterations.numpy()), 1)

    def test_a_non_finite_state_is_not_saved_and_the_error_names_the_last_good_one(self):
        folder = self.tmp_path()
        state, model, _ = _state(folder, steps_per_update=2)
        state.restore()
        state.save(2)
        model.dense.bias.assign([np.nan, 0.0])
        with self.assertRaises(TrainingDiverged) as raised:
            state.save(5)
        good = os.path.join(str(folder), "ckpt-2")
        self.assertEqual((raised.exception.step, raised.exception.last_good_checkpoint), (3, good))
        self.assertEqual(str(raised.exception),
                         "training diverged at step 3: the weights or optimizer slots hold "
                         f"non-finite values; the last good checkpoint, {good}, is kept and a "
                         "rerun resumes from it; lower the learning rate (or check the input "
                         "data) and rerun")
        self.assertEqual(tf.train.latest_checkpoint(str(folder)), good)

    def test_what_a_cut_save_left_is_removed_when_the_state_is_built(self):
        folder = self.tmp_path()
        (folder / "ckpt-3_temp").mkdir(parents=True)
        (folder / "ckpt-3_temp" / "part").write_text("cut")
        (folder / f"checkpoint.tmp{'a' * 32}").write_text("cut")
        (folder / "notes.txt").write_text("kept")
        _state(folder)
        self.assertEqual(os.listdir(folder), ["notes.txt"])

    def test_a_checkpoint_of_another_model_is_refused_naming_the_argument(self):
        folder = self.tmp_path()
        state, _, _ = _state(folder)
        state.save(1)
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Dense(4)])
        model(np.zeros((1, 3), np.float32))
        model.checkpoint_variables = lambda: {"kernel": model.layers[0].kernel}
        optimizer = keras.optimizers.SGD()
        optimizer.build(model.trainable_variables)
        other = TrainingState(str(folder), model, optimizer, argument="resume_dir")
        with self.assertRaisesRegex(ValueError, f"^resume_dir={folder} holds .*ckpt-1, which "
                                                "does not fit this model and optimizer .*; "
                                                "pass another resume_dir, or delete"):
            other.restore()


if __name__ == "__main__":
    tf.test.main()
