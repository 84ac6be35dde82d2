"""training.optimization against NumPy references of the original AdamW and of LAMB."""

import math

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from modeling.pretrainer import BertPretrainer
from tests.fixtures import tiny_config
from training.configs import OptimizationConfig
from training.optimization import BertAdamW, Lamb, WarmupLinearDecay, create_optimizer, plan

# The original excluded variables from decay by these name fragments.
ORIGINAL_EXCLUDED = ("LayerNorm", "layer_norm", "bias")


def tiny_model() -> keras.Model:
    """Dense -> LayerNorm -> Dense, named so the original's name rule applies."""
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(5, name="dense")(inputs)
    hidden = keras.layers.LayerNormalization(name="LayerNorm")(hidden)
    model = keras.Model(inputs, keras.layers.Dense(3, name="output")(hidden))
    rng = np.random.default_rng(0)
    for variable in model.trainable_variables:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return model


def gradient_sequence(model, steps, seed=1):
    rng = np.random.default_rng(seed)
    # Alternating scales: some steps exceed the clip norm of 1.0, some do not.
    return [[rng.normal(scale=[0.05, 2.0][step % 2], size=v.shape) for v in
             model.trainable_variables] for step in range(steps)]


def np_schedule(step, init_lr, total, warmup, end_lr=0.0):
    if step < warmup:
        return init_lr * step / warmup
    return (init_lr - end_lr) * (1 - min(step, total) / total) + end_lr


def reference(params, grads_seq, names, lamb, init_lr=0.1, total=6, warmup=2, wd=0.01):
    """The original AdamW (no bias correction) or LAMB, in float64."""
    b1, b2 = 0.9, 0.999
    params = [p.astype("float64") for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for step, grads in enumerate(grads_seq):
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        grads = [g * 1.0 / max(norm, 1.0) for g in grads]
        lr = np_schedule(step, init_lr, total, warmup)
        for i, (g, name) in enumerate(zip(grads, names)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g ** 2
            mh, vh = (m[i] / (1 - b1 ** (step + 1)), v[i] / (1 - b2 ** (step + 1))) \
                if lamb else (m[i], v[i])
            update = mh / (np.sqrt(vh) + 1e-6)
            decays = not any(part in name for part in ORIGINAL_EXCLUDED)
            ratio = 1.0
            if decays:
                update = update + wd * params[i]
                if lamb:
                    ratio = np.linalg.norm(params[i]) / np.linalg.norm(update)
            params[i] = params[i] - lr * ratio * update
    return params


def first_moments(optimizer):
    return [v.numpy() for v in optimizer.variables if v.path.endswith("_m")]


class OptimizerUpdateTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters("adamw", "lamb")
    def test_updates_match_numpy_reference(self, optimizer_type):
        model = tiny_model()
        variables = model.trainable_variables
        initial = [v.numpy() for v in variables]
        grads_seq = gradient_sequence(model, 5)
        optimizer = create_optimizer(0.1, num_train_steps=6, num_warmup_steps=2,
                                     optimizer_type=optimizer_type)
        step = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)))
        for grads in grads_seq:
            step([tf.constant(g, "float32") for g in grads])
        expected = reference(initial, grads_seq, [v.path for v in variables],
                             lamb=optimizer_type == "lamb")
        for variable, want in zip(variables, expected):
            self.assertAllClose(variable.numpy(), want, atol=1e-6, rtol=1e-7, msg=variable.path)
        self.assertIsInstance(optimizer, {"adamw": BertAdamW, "lamb": Lamb}[optimizer_type])

    def test_keras_adamw_differs_by_its_bias_correction(self):
        """Why BertAdamW exists: Keras' first step is lr * sign(g), the original's about 3.16x."""
        steps = {}
        for name, optimizer in [("keras", keras.optimizers.AdamW(1.0, weight_decay=0.0,
                                                                 epsilon=1e-6)),
                                ("bert", BertAdamW(1.0, weight_decay_rate=0.0))]:
            variable = keras.Variable(np.zeros((2, 2), "float32"))
            optimizer.apply_gradients([(tf.ones((2, 2)), variable)])
            steps[name] = -variable.numpy()[0, 0]
        self.assertAllClose(steps["keras"], 1.0, rtol=1e-3, atol=0)
        self.assertAllClose(steps["bert"], 0.1 / np.sqrt(0.001), rtol=1e-3, atol=0)

    def test_decay_exclusions_follow_the_original_names(self):
        model = BertPretrainer(tiny_config(num_hidden_layers=1))
        optimizer = create_optimizer(1e-4, 10, 1)
        names = model.checkpoint_variables()
        self.assertGreater(len(names), 10)
        for name, variable in names.items():
            expected = not any(part in name for part in ORIGINAL_EXCLUDED)
            self.assertEqual(optimizer.decays(variable), expected, msg=name)
        optimizer = create_optimizer(1e-4, 10, 1)
        optimizer.exclude_from_weight_decay(var_names=["word_embeddings"])
        self.assertFalse(optimizer.decays(names["bert/embeddings/word_embeddings"]))
        self.assertTrue(optimizer.decays(names["bert/embeddings/position_embeddings"]))

    @parameterized.parameters(1.0, None)
    def test_global_norm_clipping(self, clip_norm):
        variables = [keras.Variable(np.zeros((3, 4), "float32")), keras.Variable(np.zeros(4))]
        grads = [np.full((3, 4), 2.0, "float32"), np.full(4, 2.0, "float32")]
        optimizer = create_optimizer(1e-3, 10, 0, clip_norm=clip_norm)
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
        scale = 1.0 / 8.0 if clip_norm else 1.0  # the global norm is sqrt(16 * 4) = 8
        for moment, grad in zip(first_moments(optimizer), grads):
            self.assertAllClose(moment, 0.1 * grad * scale, rtol=1e-6, atol=0)

    @parameterized.parameters("adamw", "lamb")
    def test_accumulated_micro_batches_equal_one_big_batch(self, optimizer_type):
        """4 micro-batches of 2, accumulated, step like one batch of 8 (linear model, MSE)."""
        rng = np.random.default_rng(3)
        x = rng.normal(size=(3, 8, 4)).astype("float32")
        y = rng.normal(size=(3, 8, 2)).astype("float32")
        runs = {}
        for accumulate in (1, 4):
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
            model.set_weights([np.ones((4, 2), "float32"), np.zeros(2, "float32")])
            optimizer = create_optimizer(0.05, num_train_steps=3, num_warmup_steps=1,
                                         optimizer_type=optimizer_type,
                                         gradient_accumulation_steps=accumulate)

            @tf.function
            def step(inputs, targets, model=model, optimizer=optimizer):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((model(inputs) - targets) ** 2)
                variables = model.trainable_variables
                optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

            for batch in range(3):
                for part in np.split(np.arange(8), accumulate):
                    step(x[batch, part], y[batch, part])
            self.assertEqual(int(optimizer.iterations), 3)
            runs[accumulate] = model.get_weights()
        for big, accumulated in zip(runs[1], runs[4]):
            self.assertAllClose(accumulated, big, atol=1e-6, rtol=1e-7)

    def test_each_variable_update_is_one_compiled_computation(self):
        """The moments, the step and the new value come out of one XLA call per variable."""
        variables = [keras.Variable(np.ones((3, 4), "float32")), keras.Variable(np.ones(4))]
        optimizer = create_optimizer(1e-3, 10, 0)
        optimizer.build(variables)
        step = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)))
        graph = step.get_concrete_function(
            [tf.TensorSpec(v.shape, "float32") for v in variables]).graph
        calls = [op for op in graph.get_operations()
                 if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
        compiled = [op for op in calls if op.get_attr("_XlaMustCompile")]
        self.assertLen(compiled, len(variables))
        updates = {op.type for op in graph.get_operations()} & {"AssignSubVariableOp", "Square"}
        self.assertEmpty(updates)  # no element-wise update math outside the compiled calls


class ScheduleAndArgumentsTest(tf.test.TestCase):

    def test_schedule_values(self):
        schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
        values = {step: float(schedule(step)) for step in (0, 5, 9, 10, 55, 100, 150)}
        expected = {0: 0.0, 5: 5e-5, 9: 9e-5, 10: 9e-5, 55: 4.5e-5, 100: 0.0, 150: 0.0}
        for step, want in expected.items():
            self.assertNear(values[step], want, max(1e-6 * abs(want), 1e-12), msg=f"step {step}")
        no_warmup = WarmupLinearDecay(2.0, num_train_steps=4, end_lr=1.0)
        self.assertEqual([float(no_warmup(step)) for step in range(6)],
                         [2.0, 1.75, 1.5, 1.25, 1.0, 1.0])

    def test_schedule_and_optimizer_serialize(self):
        schedule = WarmupLinearDecay(3e-5, 1000, 100, end_lr=1e-6)
        restored = keras.optimizers.schedules.deserialize(
            keras.optimizers.schedules.serialize(schedule))
        self.assertIsInstance(restored, WarmupLinearDecay)
        self.assertEqual(restored.get_config(), schedule.get_config())
        optimizer = create_optimizer(1e-4, 1000, 100, optimizer_type="lamb",
                                     gradient_accumulation_steps=4)
        clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
        self.assertIsInstance(clone, Lamb)
        config = clone.get_config()
        self.assertEqual((config["weight_decay_rate"], config["epsilon"],
                          config["global_clipnorm"], config["gradient_accumulation_steps"]),
                         (0.01, 1e-6, 1.0, 4))
        self.assertEqual(float(clone.learning_rate), 0.0)

    def test_invalid_arguments(self):
        with self.assertRaisesRegex(ValueError, "optimizer_type.*adamw, lamb"):
            create_optimizer(1e-4, 10, 1, optimizer_type="sgd")
        with self.assertRaisesRegex(ValueError, "gradient_accumulation_steps"):
            create_optimizer(1e-4, 10, 1, gradient_accumulation_steps=0)
        with self.assertRaisesRegex(ValueError, "num_warmup_steps"):
            WarmupLinearDecay(1e-4, 10, 20)


class PlanTest(tf.test.TestCase):
    """One rule for the schedule's length; each trainer counts the batches it runs."""

    def test_the_runners_and_fit_count_their_own_batches_by_one_rule(self):
        # 10 examples in batches of 4, 3 epochs. The runners' repeated stream of whole
        # batches makes floor(10 / 4 x 3) = 7 updates; Keras' fit, whose epochs each end
        # with a short batch, makes ceil(10 / 4) x 3 = 9.
        self.assertEqual(OptimizationConfig(num_train_epochs=3.0).schedule(10, 4), (7, 0))
        self.assertEqual(plan(10 / 4, 3, 0.1), (7, 0))
        self.assertEqual(plan(math.ceil(10 / 4), 3, 0.1), (9, 0))
        # MNLI's 392,702 examples in batches of 32, 3 epochs: 36,815.8 updates, floored.
        self.assertEqual(OptimizationConfig().schedule(392702, 32), (36815, 3681))
        self.assertEqual(plan(392702 / 32, 3.0, 0.1), (36815, 3681))
        self.assertEqual(plan(0.5, 1, 0.0), (1, 0))  # at least one update
        # A fixed number of updates is one epoch of that many batches.
        self.assertEqual(OptimizationConfig(num_train_steps=50).schedule(None, 32), (50, 5))
        self.assertEqual(OptimizationConfig(num_train_steps=50, num_warmup_steps=7)
                         .schedule(None, 32), (50, 7))

    def test_plan_refuses_values_that_plan_nothing(self):
        for arguments, message in (
                ((0, 3, 0.1), "batches_per_epoch must be a positive finite number, got 0"),
                ((2.5, float("nan"), 0.1), "epochs must be a positive finite number, got nan"),
                ((2.5, 3, 1.5), r"warmup_proportion must be a finite number in \[0, 1\], "
                                "got 1.5")):
            with self.assertRaisesRegex(ValueError, f"^{message}$"):
                plan(*arguments)


if __name__ == "__main__":
    tf.test.main()
