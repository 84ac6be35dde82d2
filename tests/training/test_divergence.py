"""`fit` stops at the first non-finite step and keeps the weights from before it."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertClassifier, FitDiverged, TrainingDiverged, load_preprocessor
from tests.fixtures import REPO, TestCase
from tests.modeling.tiny_folder import tiny_folder
from training.divergence import finite_update
from training.optimization import create_optimizer

TEXTS = ["a fine film", "a dull film", "great acting", "boring plot"] * 2


class WeightsAfterEachStep(keras.callbacks.Callback):
    """Copies of the model's weights after every training step, in order."""

    def __init__(self):
        super().__init__()
        self.snapshots = []

    def on_train_begin(self, logs=None):
        self.snapshots.append(self.model.get_weights())

    def on_train_batch_end(self, batch, logs=None):
        self.snapshots.append(self.model.get_weights())


class FitDivergedTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())
        packed = load_preprocessor(cls.folder, sequence_length=8)(TEXTS)
        cls.packed = {key: value.numpy() for key, value in packed.items()}
        cls.regression = None

    def _compiled_regression(self) -> BertClassifier:
        """The class's regression model, compiled once with the optimizer compile() plans
        (the original AdamW, clipped at a global norm of 1), so that its fits on packed
        batches share one traced training step. Each test reads weights relative to its own
        start; the long schedule keeps the rate above 0 whatever ran before."""
        cls = type(self)
        if cls.regression is None:
            cls.regression = self._model(num_labels=1)
            cls.regression.compile(optimizer=create_optimizer(5e-5, num_train_steps=1000,
                                                              num_warmup_steps=0))
        return cls.regression

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(0)

    def _model(self, num_labels: int) -> BertClassifier:
        return BertClassifier.from_pretrained(self.folder, num_labels=num_labels,
                                              sequence_length=8)

    def assertWeightsEqual(self, expected: list, model: keras.Model):
        actual = model.get_weights()
        self.assertLen(actual, len(expected))
        for before, after in zip(expected, actual):
            self.assertAllEqual(before, after)

    @pytest.mark.slow
    def test_a_nan_at_step_3_stops_fit_with_the_weights_from_step_2(self):
        model = self._compiled_regression()
        # Batches of 2: the NaN target sits in the third batch.
        targets = np.array([0.1, 0.2, 0.3, 0.4, np.nan, 0.1, 0.2, 0.3], np.float32)
        batches = tf.data.Dataset.from_tensor_slices((self.packed, targets)).batch(2)
        weights = WeightsAfterEachStep()
        with self.assertRaisesRegex(ValueError, r"fit stopped at step 3 .*loss=nan.*keeps the "
                                                "weights from before it") as caught:
            model.fit(batches, verbose=0, callbacks=[weights])
        self.assertEqual(caught.exception.step, 3)
        self.assertLen(weights.snapshots, 4)  # before training, then after steps 1, 2 and 3
        self.assertWeightsEqual(weights.snapshots[2], model)
        changed = [not np.array_equal(a, b) for a, b in zip(weights.snapshots[1],
                                                            weights.snapshots[2])]
        self.assertTrue(any(changed))  # step 2 did update: the comparison can fail
        # The next fit starts afresh from those weights.
        good = tf.data.Dataset.from_tensor_slices((self.packed, np.nan_to_num(targets)))
        history = model.fit(good.batch(2), verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))

    @pytest.mark.long
    @pytest.mark.slow
    def test_a_huge_learning_rate_stops_fit_with_finite_weights(self):
        for model, compile_arguments in (
                (self._model(2), {"learning_rate": 1e30}),
                (self._model(2), {"optimizer": keras.optimizers.SGD(1e38)})):
            model.compile(**compile_arguments)
            weights = WeightsAfterEachStep()
            with self.assertRaisesRegex(ValueError, r"fit stopped at step \d+") as caught:
                model.fit(TEXTS, [0, 1] * 4, batch_size=2, epochs=5, verbose=0,
                          callbacks=[weights])
            step = caught.exception.step
            self.assertLen(weights.snapshots, step + 1)
            self.assertWeightsEqual(weights.snapshots[step - 1], model)
            for weight in model.get_weights():
                self.assertTrue(np.isfinite(weight).all())

    @pytest.mark.slow
    def test_finite_gradients_whose_norm_overflows_are_not_applied(self):
        # Loss 1.44e38 is finite, and so is each gradient; the bias's alone is 2.4e19, whose
        # square overflows, and clipping by that infinite norm would write NaN everywhere.
        model = self._compiled_regression()
        before = model.get_weights()
        targets = np.full(8, 1.2e19, np.float32)
        batches = tf.data.Dataset.from_tensor_slices((self.packed, targets)).batch(1)
        with self.assertRaisesRegex(FitDiverged, r"^fit stopped at step 1 .*loss=1.44e\+38"):
            model.fit(batches, verbose=0)
        self.assertWeightsEqual(before, model)

    def test_the_runners_and_fit_stop_by_one_rule_with_one_error(self):
        from training import loop
        self.assertIs(loop.TrainingDiverged, TrainingDiverged)
        self.assertTrue(issubclass(FitDiverged, TrainingDiverged))
        loss, gradients = tf.constant(1.0), [tf.constant([3e19, 3e19]), None]
        finite, norm = finite_update(loss, gradients)
        self.assertFalse(bool(finite))
        self.assertEqual(float(norm), np.inf)
        # Loss scaling skips overflowing steps itself: only the loss decides.
        self.assertTrue(bool(finite_update(loss, gradients, loss_scaling=True)[0]))
        self.assertFalse(bool(finite_update(tf.constant(np.nan), [tf.ones(2)])[0]))

    def test_outside_fit_a_nonfinite_batch_is_skipped_and_nothing_is_latched(self):
        model = self._model(num_labels=1)
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        before = model.get_weights()
        loss = model.train_on_batch(self.packed, np.full(8, np.nan, np.float32))
        self.assertTrue(np.isnan(loss))
        self.assertWeightsEqual(before, model)
        model.train_on_batch(self.packed, np.full(8, 0.5, np.float32))
        self.assertFalse(all(np.array_equal(a, b) for a, b in zip(before, model.get_weights())))

    @pytest.mark.long
    @pytest.mark.slow
    def test_two_replicas_skip_the_step_together(self):
        script = textwrap.dedent("""
            import json
            import tensorflow as tf
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
            import keras
            import numpy as np
            from training.divergence import StepGuard, guarded_train_step
            from training.optimization import create_optimizer

            class Linear(keras.Model):
                def __init__(self):
                    super().__init__()
                    self.dense = keras.layers.Dense(1)
                def call(self, x, training=None):
                    return self.dense(x)[:, 0]
                def train_step(self, data):
                    return guarded_train_step(self, data, self.guard)

            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            report = {}
            for name, optimizer in (("adam", lambda: keras.optimizers.Adam(1e-2)),
                                    ("bert_adamw", lambda: create_optimizer(1e-2, 100, 0))):
                with strategy.scope():
                    model = Linear()
                    model(np.zeros((1, 3), np.float32))
                    model.compile(optimizer=optimizer(), loss="mse")
                    model.guard = StepGuard()
                x = np.ones((16, 3), np.float32)
                y = np.zeros(16, np.float32)
                y[9] = np.nan  # the third batch of 4, on the second replica
                after = []
                class Keep(keras.callbacks.Callback):
                    def on_train_batch_end(self, batch, logs=None):
                        after.append(model.get_weights())
                model.fit(x, y, batch_size=4, shuffle=False, verbose=0,
                          callbacks=[Keep(), model.guard.start()])
                error = model.guard.finish()
                report[name] = {
                    "step": error.step, "steps_run": len(after),
                    "kept": all(np.array_equal(a, b)
                                for a, b in zip(after[1], model.get_weights()))}
            print(json.dumps(report))
        """)
        environment = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env=environment, timeout=600, check=False)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        report = json.loads(result.stdout.strip().splitlines()[-1])
        expected = {"step": 3, "steps_run": 3, "kept": True}
        self.assertEqual(report, {"adam": expected, "bert_adamw": expected})


if __name__ == "__main__":
    tf.test.main()
