"""BertAdamW's optional bias correction against Adam's update computed by hand."""

import math

import keras
import numpy as np
import tensorflow as tf

from training.optimization import BertAdamW, create_optimizer

B1, B2, EPS, RATE, DECAY = 0.9, 0.999, 1e-6, 0.01, 0.01
# Gradients for a [2, 2] kernel (decays) and a [2] bias (does not), three steps.
KERNEL_GRADS = [[[0.5, -1.0], [2.0, 0.1]], [[0.4, -0.2], [1.0, -0.3]], [[-0.6, 0.3], [0.2, 0.5]]]
BIAS_GRADS = [[1.0, -0.25], [0.5, 0.75], [-2.0, 0.1]]
KERNEL_START = [[0.3, -0.7], [1.1, 0.2]]
BIAS_START = [0.05, -0.4]


def by_hand(start, grads, decays: bool, corrected: bool) -> list[list[float]]:
    """Scalar-by-scalar Adam with decoupled decay, in Python floats: the values after each step."""
    values, m, v, history = list(start), [0.0] * len(start), [0.0] * len(start), []
    for step, gradient in enumerate(grads, 1):
        for i, g in enumerate(gradient):
            m[i] = B1 * m[i] + (1 - B1) * g
            v[i] = B2 * v[i] + (1 - B2) * g * g
            m_used = m[i] / (1 - B1 ** step) if corrected else m[i]
            v_used = v[i] / (1 - B2 ** step) if corrected else v[i]
            update = m_used / (math.sqrt(v_used) + EPS)
            if decays:
                update += DECAY * values[i]
            values[i] -= RATE * update
        history.append(list(values))
    return history


class AdamBiasCorrectionTest(tf.test.TestCase):

    def _run(self, bias_correction: bool):
        kernel = keras.Variable(np.array(KERNEL_START, "float32"), name="kernel")
        bias = keras.Variable(np.array(BIAS_START, "float32"), name="bias")
        optimizer = BertAdamW(learning_rate=RATE, weight_decay_rate=DECAY,
                              bias_correction=bias_correction)
        history = []
        for kernel_grad, bias_grad in zip(KERNEL_GRADS, BIAS_GRADS):
            optimizer.apply_gradients([
                (tf.constant(kernel_grad, "float32"), kernel),
                (tf.constant(np.array(bias_grad), "float32"), bias)])
            history.append((kernel.numpy(), bias.numpy()))
        return history

    def _expected(self, corrected: bool):
        flat_kernel = [value for row in KERNEL_START for value in row]
        kernel = by_hand(flat_kernel, [[g for row in grads for g in row]
                                       for grads in KERNEL_GRADS], True, corrected)
        bias = by_hand(BIAS_START, BIAS_GRADS, False, corrected)
        return [(np.reshape(k, (2, 2)), b) for k, b in zip(kernel, bias)]

    def test_corrected_update_is_adams_for_every_step(self):
        for (kernel, bias), (want_kernel, want_bias) in zip(self._run(True),
                                                            self._expected(corrected=True)):
            self.assertAllClose(kernel, want_kernel, rtol=1e-6, atol=1e-7)
            self.assertAllClose(bias, want_bias, rtol=1e-6, atol=1e-7)

    def test_first_corrected_step_moves_each_weight_by_the_rate(self):
        # Adam's first step is lr * g / |g| (plus decay); the original's is about 3.16 lr.
        (_, bias), = self._run(True)[:1]
        self.assertAllClose(BIAS_START - np.array(bias), RATE * np.sign(BIAS_GRADS[0]),
                            rtol=1e-5)

    def test_default_is_the_original_update(self):
        for (kernel, bias), (want_kernel, want_bias) in zip(self._run(False),
                                                            self._expected(corrected=False)):
            self.assertAllClose(kernel, want_kernel, rtol=1e-6, atol=1e-7)
            self.assertAllClose(bias, want_bias, rtol=1e-6, atol=1e-7)
        corrected = self._run(True)[-1][0]
        self.assertNotAllClose(self._run(False)[-1][0], corrected)

    def test_create_optimizer_and_serialization_carry_the_option(self):
        optimizer = create_optimizer(1e-3, 10, 1, adam_bias_correction=True)
        self.assertTrue(optimizer.bias_correction)
        restored = BertAdamW.from_config(optimizer.get_config())
        self.assertTrue(restored.bias_correction)
        self.assertFalse(create_optimizer(1e-3, 10, 1).bias_correction)


if __name__ == "__main__":
    tf.test.main()
