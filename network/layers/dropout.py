"""Dropout that can drop a few rows of a tensor exactly as a call on the whole tensor would."""

from __future__ import annotations

import keras
import tensorflow as tf

from network.layers import fast_paths


@keras.saving.register_keras_serializable(package="bert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, whose masks `fast_paths.dropout_keep_mask` draws.

    A model that computes only some positions of its last block (see
    `BertEncoder.call`) still draws each of that block's masks for the whole
    tensor and keeps the rows at `output_positions`, so that its seeded runs
    drop the same units as when every position is computed. The seeds come
    from the layer's own `SeedGenerator`, advanced once per call as Keras
    does, so a run resumed with the generators' state draws the same masks.
    """

    def call(self, inputs, training=False, output_positions=None, full_shape=None, axis=1):
        """`inputs` with units dropped; `output_positions` [batch, n] for a gathered tensor.

        With `output_positions`, `inputs` are the rows at those positions,
        along `axis`, of a tensor of shape `full_shape`, and the units dropped
        are those a call on that whole tensor drops.
        """
        if not self.drops(training):
            return super().call(inputs, training=training)
        keep, scale = self.keep_mask(tf.shape(inputs) if full_shape is None else full_shape,
                                     inputs.dtype, output_positions, axis)
        return tf.where(keep, inputs * scale, tf.zeros_like(inputs))

    def drops(self, training) -> bool:
        """Whether a call with this `training` draws a mask (`keep_mask` applies)."""
        return bool(training) and 0.0 < self.rate < 1.0 and self.noise_shape is None

    def keep_mask(self, shape: tf.Tensor, dtype: tf.DType, output_positions=None,
                  axis: int = 1) -> tuple[tf.Tensor, tf.Tensor]:
        """The units a call on a tensor of `shape` keeps (those rows of them with
        `output_positions`), and their scale: for attention, which applies the
        mask inside its own gradient."""
        keep, scale = fast_paths.dropout_keep_mask(shape, self.rate, self._next_seed(), dtype)
        if output_positions is not None:
            keep = tf.gather(keep, output_positions, axis=axis, batch_dims=1)
        return keep, scale

    def _next_seed(self) -> tf.Tensor:
        seed = self.seed_generator.next()
        # The stateless ops take int32 seeds under XLA (Keras folds them the same way).
        return tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
