"""modeling.losses: the weighted classification loss is Keras' class-weighted mean."""

import keras
import numpy as np
import tensorflow as tf

from modeling.losses import classification_loss, weighted_classification_loss
from tests.fixtures import TestCase


class LossesTest(TestCase):

    def test_weighted_loss_is_keras_class_weight_mean(self):
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(5, 3)).astype("float32")
        labels = np.array([0, 2, 1, 2, 2])
        weights = [0.5, 1.0, 3.0]
        keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            labels, logits, sample_weight=np.array([weights[i] for i in labels]))
        ours = weighted_classification_loss(weights)({"label_ids": labels}, logits)["loss"]
        self.assertAllClose(ours, keras_loss, rtol=1e-6)
        unit = weighted_classification_loss([1.0] * 3)({"label_ids": labels}, logits)["loss"]
        self.assertAllClose(unit, classification_loss({"label_ids": labels}, logits)["loss"],
                            rtol=1e-6)


if __name__ == "__main__":
    tf.test.main()
