"""Dropout whose random mask is cheap inside XLA-compiled training steps."""

from __future__ import annotations

import keras
import tensorflow as tf

from core.framework import compiled_by_xla


@keras.saving.register_keras_serializable(package="bert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with cheaper random masks, drawn in float32.

    Keras draws the mask with TensorFlow's default stateless generator, in
    the input's dtype. Two costs follow, and this layer avoids both:

    - XLA expands that generator into code that, on CPU, made dropout a third
      of the small model's forward pass (104 ms against 55 ms without
      dropout). Under XLA the mask is drawn by ThreeFry, which XLA implements
      natively: 66 ms. TensorFlow has no ThreeFry kernel outside XLA, so
      elsewhere the default generator stays.
    - Under XLA each unit is decided by 16 random bits, not 32: every 32-bit
      draw serves two units, which halves ThreeFry's work (its rounds were
      still about 7% of a small model's compiled training step). The rate
      is then held to 1/65536 (0.1 becomes 0.100006), and kept units are
      scaled by the inverse of the keep probability actually drawn, so the
      expected output still equals the input.
    - Under a bfloat16 policy the draws themselves were bfloat16, 1.5x slower
      than float32 draws on CPU and only 8 bits fine, so the rate was kept
      only to about 1%. Drawing in float32 keeps it exactly and costs less.

    In float32 outside XLA the masks are bit for bit Keras's. The seeds come
    from the layer's own `SeedGenerator`, advanced once per call as Keras
    does, so a run resumed with the generators' state draws the same masks.
    """

    def call(self, inputs, training=False):
        if not self.drops(training):
            return super().call(inputs, training=training)
        keep, scale = self.keep_mask(tf.shape(inputs), inputs.dtype)
        return tf.where(keep, inputs * scale, tf.zeros_like(inputs))

    def drop_rows(self, rows_of_inputs, rows, full_shape, axis: int = 1, training=False):
        """Dropout of some rows of a tensor, with the units a call on all of it drops.

        `rows_of_inputs` is a [batch, ...] tensor of shape `full_shape` gathered
        at `rows` [batch, n] along `axis`: a model that needs only some
        positions of its last block computes just those (see
        `BertEncoder`), and still draws a whole mask and keeps its rows, so
        that its seeded runs drop the same units as when every position is
        computed. With `rows=None` the input is the whole tensor: a plain call.
        """
        if rows is None:
            return self(rows_of_inputs, training=training)
        if not self.drops(training):
            return rows_of_inputs
        keep, scale = self.keep_mask(full_shape, rows_of_inputs.dtype)
        keep = tf.gather(keep, rows, axis=axis, batch_dims=1)
        return tf.where(keep, rows_of_inputs * scale, tf.zeros_like(rows_of_inputs))

    def drops(self, training) -> bool:
        """Whether a call with this `training` draws a mask (`keep_mask` applies)."""
        return bool(training) and 0.0 < self.rate < 1.0 and self.noise_shape is None

    def keep_mask(self, shape: tf.Tensor, dtype: tf.DType) -> tuple[tf.Tensor, tf.Tensor]:
        """The units a call on a tensor of `shape` keeps, and their scale.

        Under XLA each unit compares 16 of ThreeFry's bits with the rate;
        elsewhere a float32 uniform draw, as Keras's. For callers that apply
        the mask themselves (attention, inside its own gradient).
        """
        if not compiled_by_xla():
            draws = tf.random.stateless_uniform(shape, self._next_seed(), alg="auto_select")
            return draws >= self.rate, tf.constant(1.0 / (1.0 - self.rate), dtype)
        size = tf.reduce_prod(shape)
        words = tf.random.stateless_uniform(
            [(size + 1) // 2], self._next_seed(), minval=None, maxval=None, dtype=tf.uint32,
            alg="threefry")
        halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
        dropped_levels = min(max(round(self.rate * _LEVELS), 1), _LEVELS - 1)
        scale = tf.constant(_LEVELS / (_LEVELS - dropped_levels), dtype)
        return tf.reshape(halves >= dropped_levels, shape), scale

    def _next_seed(self) -> tf.Tensor:
        seed = self.seed_generator.next()
        # The stateless ops take int32 seeds under XLA (Keras folds them the same way).
        return tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)


_LEVELS = 1 << 16  # the values 16 random bits take
