"""The fast-path switch: on and off, the encoder and the pre-training model give the same
outputs, losses and gradients, eagerly and under XLA, in float32 and mixed bfloat16."""

import os
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from modeling.pretrainer import BertPretrainer
from network.encoder import BertEncoder
from network.layers import fast_paths
from network.layers.transformer import TransformerBlock
from tests.fixtures import tiny_config
from training.optimization import create_optimizer

# 256 x 16 = 4096 rows: the bias gradients under XLA take the product path.
BATCH, LENGTH, PREDICTIONS, VOCAB = 256, 16, 3, 64
CONFIG = tiny_config(max_position_embeddings=LENGTH, hidden_dropout_prob=0.2,
                     attention_probs_dropout_prob=0.2)


def features() -> dict:
    """A pre-training batch with padding, as the records hold it."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(LENGTH // 2, LENGTH + 1, BATCH)
    mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype("int32")
    positions = np.stack([rng.choice(np.arange(1, length), PREDICTIONS, replace=False)
                          for length in lengths])
    arrays = {"input_ids": rng.integers(1, VOCAB, (BATCH, LENGTH)) * mask, "input_mask": mask,
              "segment_ids": (np.arange(LENGTH) >= LENGTH // 2)[None, :] * mask,
              "masked_lm_positions": positions, "masked_lm_ids":
              rng.integers(1, VOCAB, positions.shape),
              "masked_lm_weights": np.ones(positions.shape, "float32"),
              "next_sentence_labels": rng.integers(0, 2, (BATCH, 1))}
    return {key: tf.constant(value, "float32" if key == "masked_lm_weights" else "int32")
            for key, value in arrays.items()}


def snapshot(model: keras.Model) -> list[np.ndarray]:
    """Every variable's value, the dropout generators' seed states included."""
    return [variable.numpy() for variable in model.variables]


def run_step(model: keras.Model, loss_of, state: list, training: bool, jit_compile: bool,
             fast: bool) -> list[np.ndarray]:
    """The loss and every gradient of one step, traced with fast paths on or off, from the
    variables' `state` (a `snapshot`: the same weights and dropout seeds every time)."""
    for variable, value in zip(model.variables, state):
        variable.assign(value)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_of(model, training)
        return [loss, *tape.gradient(loss, model.trainable_variables)]

    if fast:
        results = step()
    else:
        with fast_paths.disabled():
            results = step()
    return [tf.convert_to_tensor(result).numpy() for result in results]


class FastPathSwitchTest(tf.test.TestCase, parameterized.TestCase):

    def test_the_switch_is_on_by_default_and_off_within_disabled(self):
        self.assertTrue(fast_paths.enabled())
        with self.assertRaisesRegex(RuntimeError, "inside"), fast_paths.disabled():
            self.assertFalse(fast_paths.enabled())
            raise RuntimeError("inside")
        self.assertTrue(fast_paths.enabled())

    def test_the_environment_variable_turns_them_off_and_refuses_other_values(self):
        for value, expected in (("0", False), ("1", True), (" 1 ", True)):
            with mock.patch.dict(os.environ, {"BERT_FAST_PATHS": value}):
                self.assertEqual(fast_paths.enabled_by_environment(), expected)
        with mock.patch.dict(os.environ, {"BERT_FAST_PATHS": "off"}), self.assertRaisesRegex(
                ValueError, "BERT_FAST_PATHS must be 0 or 1, got 'off'"):
            fast_paths.enabled_by_environment()

    def test_off_the_step_is_traced_as_the_plain_model(self):
        """Off, no fast path is taken (else the comparisons below would compare a path with
        itself): XLA-compiled float32 pre-training, where on takes every one."""
        inputs = features()
        model = BertPretrainer(CONFIG, "mlm_nsp")
        taken = {name: self.enter_context(mock.patch.object(
            fast_paths, name, wraps=getattr(fast_paths, name)))
            for name in ("attend", "_sixteen_bit_keep_mask", "_add_bias_summed_by_product")}
        block_calls = self.enter_context(mock.patch.object(
            TransformerBlock, "call", autospec=True, side_effect=TransformerBlock.call))

        def traced_op_types():
            step = tf.function(lambda: model.pretraining_losses(
                inputs, model(inputs, training=True))["loss"], jit_compile=True)
            return {op.type for op in step.get_concrete_function().graph.get_operations()}

        def positions_given():
            return [call.kwargs.get("output_positions") is not None
                    for call in block_calls.call_args_list]

        on = traced_op_types()
        self.assertTrue(all(spy.called for spy in taken.values()))
        self.assertEqual(positions_given(), [False, True])  # the last block, at the positions
        self.assertNotIn("SparseSoftmaxCrossEntropyWithLogits", on)
        for spy in (*taken.values(), block_calls):
            spy.reset_mock()
        with fast_paths.disabled():
            off = traced_op_types()
        self.assertFalse(any(spy.called for spy in taken.values()))
        self.assertEqual(positions_given(), [False, False])
        self.assertIn("SparseSoftmaxCrossEntropyWithLogits", off)

    def assertSamePaths(self, make, loss_of, policy: str, jit_compile: bool) -> None:
        """Fast paths on and off: the same loss and gradients but for rounding.

        Dropout is on where both draw the same masks (float32 outside XLA,
        where the masks are Keras's); elsewhere the fast masks are other units
        than Keras's, so the step runs in inference mode (the written
        attention gradient with a mask is pinned against Keras's ops with the
        same mask in test_layer_fast_paths).

        float32: the paths sum the same terms in another order (bias
        gradients over 4096 rows, softmax row sums over the head size rather
        than the keys, logsumexp rather than the fused cross-entropy), so each
        gradient agrees to 1e-5 of its largest entry. bfloat16: the fast paths
        themselves are float32-only, but the last block's rows round
        otherwise; the fast path is held to float32 (the plain model, outside
        XLA): it may stray from it no more than twice as far as the plain
        bfloat16 model does, outside XLA (which rounds every op's result as
        written) or under the same compilation. XLA fuses and rounds the
        bfloat16 model its own way, by CPU: on an AVX2-only CPU its loss here
        lies 4e-5 of the summed terms' size from float32, five times the
        eager model's lucky draw, fast paths on or off alike.
        """
        training = policy == "float32" and not jit_compile
        model = make(policy)
        state = snapshot(model)
        fast = run_step(model, loss_of, state, training, jit_compile, fast=True)
        plain = run_step(model, loss_of, state, training, jit_compile, fast=False)
        names = ["loss", *(variable.path for variable in model.trainable_variables)]
        if policy == "float32":
            for name, ours, reference in zip(names, fast, plain):
                scale = max(np.abs(reference).max(), 1e-6)
                if name.endswith("key_bias"):  # zero but for rounding: softmax is shift-invariant
                    self.assertLess(np.abs(ours).max(), 1e-5 * max(1.0, scale))
                    continue
                self.assertAllClose(ours / scale, reference / scale, rtol=0, atol=1e-5, msg=name)
            return
        exact = make("float32")
        truth = run_step(exact, loss_of, state, training, False, fast=False)
        as_written = run_step(model, loss_of, state, training, False, fast=False)
        for index, name in enumerate(names):
            if name.endswith("key_bias"):
                continue
            scale = max(np.abs(truth[index]).max(), 1e-6)
            rounding = max(np.abs(as_written[index] - truth[index]).max(),
                           np.abs(plain[index] - truth[index]).max())
            self.assertLessEqual(
                np.abs(fast[index] - truth[index]).max(), 2 * rounding + 1e-3 * scale,
                msg=f"{name}, fast path: further from float32 than bfloat16 rounding "
                    f"({rounding:.3g})")

    @parameterized.product(policy=["float32", "mixed_bfloat16"], jit_compile=[False, True],
                           causal=[False, True], at_positions=[False, True])
    @pytest.mark.long
    def test_encoder(self, policy, jit_compile, causal, at_positions):
        inputs = features()
        weights = tf.constant(np.random.default_rng(1).normal(size=(BATCH, LENGTH, 32)),
                              "float32")

        def make(dtype):
            keras.utils.set_random_seed(5)
            return BertEncoder(CONFIG, causal=causal, dtype=dtype)

        def loss_of(model, training):
            positions = inputs["masked_lm_positions"] if at_positions else None
            outputs = model(inputs, training=training, output_positions=positions)
            sequence = tf.cast(outputs["sequence_output"], "float32")
            read = weights[:, :PREDICTIONS] if at_positions else weights
            return (tf.reduce_sum(sequence * read)
                    + tf.reduce_sum(tf.cast(outputs["pooled_output"], "float32") * weights[:, 0]))

        self.assertSamePaths(make, loss_of, policy, jit_compile)

    @parameterized.product(policy=["float32", "mixed_bfloat16"], jit_compile=[False, True],
                           objective=["mlm_nsp", "ltr"])
    @pytest.mark.long
    def test_pretrainer(self, policy, jit_compile, objective):
        """Masked LM at the masked positions only, or left-to-right (causal) at every one."""
        inputs = features()

        def make(dtype):
            keras.utils.set_random_seed(6)
            return BertPretrainer(CONFIG, objective, dtype=dtype)

        def loss_of(model, training):
            return model.pretraining_losses(inputs, model(inputs, training=training))["loss"]

        self.assertSamePaths(make, loss_of, policy, jit_compile)

    @parameterized.product(optimizer_type=["adamw", "lamb"], jit_compile=[False, True])
    def test_optimizer_update(self, optimizer_type, jit_compile):
        """The optimizer's update, compiled on its own or not, moves the variables alike."""
        rng = np.random.default_rng(3)
        start = [rng.normal(size=shape).astype("float32") for shape in ((64, 32), (32,))]
        grads = [tf.constant(rng.normal(size=value.shape), tf.float32) for value in start]

        def updated():
            variables = [keras.Variable(value, name=name)
                         for value, name in zip(start, ("kernel", "bias"))]
            optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=2,
                                         optimizer_type=optimizer_type, clip_norm=1.0)
            step = tf.function(lambda: optimizer.apply(grads, variables),
                               jit_compile=jit_compile)
            for _ in range(3):
                step()
            return [variable.numpy() for variable in variables]

        fast = updated()
        with fast_paths.disabled():
            plain = updated()
        for fast_value, plain_value, value in zip(fast, plain, start):
            self.assertNotAllClose(fast_value, value)
            self.assertAllClose(fast_value, plain_value, rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    tf.test.main()
