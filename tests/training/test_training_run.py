"""TrainingRun: what its callers state (the encoder's width, the accumulation) decides the run."""

import keras
import numpy as np
import tensorflow as tf

from tests.training.test_training_faults import TinyRegression
from training.configs import OptimizationConfig, TrainingConfig
from training.distribution import XLA_CPU_MAX_HIDDEN_SIZE
from training.training_run import TrainingRun


def _loss(features, outputs):
    return {"loss": tf.reduce_mean(tf.square(outputs[:, 0] - features["y"]))}


class TrainingRunTest(tf.test.TestCase):

    def _run(self, hidden_size: int, accumulation: int = 1) -> TrainingRun:
        folder = self.create_tempdir().full_path
        keras.utils.set_random_seed(0)
        cpu = tf.distribute.OneDeviceStrategy("/cpu:0")  # XLA's default differs on a GPU
        with cpu.scope():
            model = TinyRegression()  # a model without a BERT config: the width is passed
            model({"x": np.zeros((1, 4), "float32")})
        return TrainingRun(model, _loss, cpu,
                           OptimizationConfig(learning_rate=1e-3, num_train_steps=3,
                                              gradient_accumulation_steps=accumulation),
                           TrainingConfig(output_dir=folder, train_batch_size=4),
                           num_updates=3, num_warmup=0, checkpoint_dir=folder,
                           hidden_size=hidden_size)

    def test_the_stated_width_chooses_xla_on_a_cpu(self):
        self.assertTrue(self._run(128).jit_compile)
        self.assertFalse(self._run(XLA_CPU_MAX_HIDDEN_SIZE + 1).jit_compile)

    def test_micro_batches_and_updates_follow_the_stated_accumulation(self):
        run = self._run(128, accumulation=2)
        self.assertIsNone(run.restored_from)
        rng = np.random.default_rng(0)
        arrays = {"x": rng.normal(size=(16, 4)).astype("float32"),
                  "y": rng.normal(size=16).astype("float32")}
        run.train(lambda context, micro_batch: tf.data.Dataset.from_tensor_slices(arrays)
                  .repeat().batch(micro_batch, drop_remainder=True))
        self.assertEqual((run.micro_batch, run.step, run.global_step), (2, 6, 3))
        self.assertEqual(int(run.optimizer.iterations.numpy()), 3)


if __name__ == "__main__":
    tf.test.main()
