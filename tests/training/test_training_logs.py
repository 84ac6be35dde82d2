"""`fit(..., log_dir=...)` writes the loss and the learning rate for TensorBoard, as the runners."""

import os

import keras
import pytest
import tensorflow as tf

from modeling import BertClassifier
from tests.fixtures import TestCase, event_scalars
from tests.modeling.tiny_folder import tiny_folder
from tests.training.test_resume import LABELS, TEXTS, KillAt
from training.optimization import WarmupLinearDecay, create_optimizer


class FitLogsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())

    def _model(self) -> BertClassifier:
        keras.utils.set_random_seed(0)
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16)
        model.compile(learning_rate=1e-3)
        return model

    @pytest.mark.slow
    def test_loss_and_learning_rate_every_log_freq_steps_and_validation_each_epoch(self):
        log_dir = str(self.tmp_path())
        # 9 examples in batches of 2: 5 steps an epoch, 10 in all, 1 of warm-up.
        self._model().fit(TEXTS, LABELS, batch_size=2, epochs=2, verbose=0, log_dir=log_dir,
                          log_freq=3, validation_data=(TEXTS[:4], LABELS[:4]))
        train = event_scalars(os.path.join(log_dir, "train"))
        schedule = WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=1)
        self.assertEqual([step for step, _ in train["learning_rate"]], [3, 6, 9, 10])
        for step, rate in train["learning_rate"]:  # the rate of the step after it
            self.assertAllClose(rate, float(schedule(step)), rtol=1e-6)
        self.assertEqual([step for step, _ in train["loss"]], [3, 6, 9, 10])
        self.assertIn("accuracy", train)
        validation = event_scalars(os.path.join(log_dir, "validation"))
        self.assertEqual([step for step, _ in validation["loss"]], [5, 10])
        self.assertEqual(sorted(validation), ["accuracy", "loss"])

    @pytest.mark.slow
    def test_a_resumed_fit_continues_its_curves(self):
        root = str(self.tmp_path())
        log_dir, resume_dir = os.path.join(root, "logs"), os.path.join(root, "resume")
        call = {"batch_size": 2, "epochs": 2, "verbose": 0, "log_dir": log_dir, "log_freq": 3,
                "resume_dir": resume_dir}
        # Interrupted, then called again as in a notebook: the same model object, its
        # optimizer given (compile()'s own would be planned, and the step traced, anew).
        keras.utils.set_random_seed(0)
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16)
        model.compile(optimizer=create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=1))
        with self.assertRaises(KeyboardInterrupt):  # after step 7; saved at step 5
            model.fit(TEXTS, LABELS, **call, callbacks=[KillAt(7)])
        model.fit(TEXTS, LABELS, **call)
        steps = [step for step, _ in event_scalars(os.path.join(log_dir, "train"))["loss"]]
        self.assertEqual(steps, [3, 6, 8, 10])  # the rerun counts on from its checkpoint


if __name__ == "__main__":
    tf.test.main()
