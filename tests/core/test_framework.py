"""core.framework: the version check, what each internal gives, and that no other module uses one."""

import re
import sys
import types
from pathlib import Path
from unittest import mock

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core import framework
from tests.fixtures import REPO, product_files

# Private names of the frameworks, as source text: whole private packages, and the
# attributes core.framework reaches for (the last part of each dotted internal).
PRIVATE_PACKAGES = ("tensorflow.python", "tensorflow.core", "tf.__internal__",
                    "tensorflow.__internal__", "keras.src")
PRIVATE_ATTRIBUTES = sorted(
    {name.rsplit(".", 1)[1] for name in framework.INTERNALS if name.rsplit(".", 1)[1][0] == "_"}
    | {name for names in framework.INSTANCE_INTERNALS.values() for name in names}
    | {"_all_reduce_sum_gradients", "_CHECKPOINTABLE_OBJECT_GRAPH", ".ATTRIBUTES"})
PRIVATE_USE = re.compile("|".join([re.escape(package) for package in PRIVATE_PACKAGES]
                                  + [rf"(?<!\w){re.escape(name)}\b" for name in PRIVATE_ATTRIBUTES]))


def product_sources() -> list[Path]:
    """Every Python file but the tests, and the one module allowed to use internals."""
    return [path for path in product_files() if path != REPO / "core" / "framework.py"]


class SchedulePerUpdate(keras.optimizers.schedules.LearningRateSchedule):
    """Returns the step it is called with, so a test can see which counter it got."""

    def __call__(self, step):
        return tf.cast(step, "float32")


class AccumulatingSgd(framework.OptimizerWithBatchUpdate):
    """Plain SGD on the sum of the accumulated gradients, through the adapter's public names."""

    def update_step(self, gradient, variable, learning_rate):
        raise AssertionError("apply_batch replaces Keras' per-variable path")

    def apply_batch(self, grads, variables):
        self.seen_types = {type(variable) for variable in variables}
        for grad, variable in zip(grads, variables):
            accumulator = self.gradient_accumulator(variable)
            self.assign_add(accumulator, grad)
            self.assign_sub(variable, accumulator)


class VersionCheckTest(tf.test.TestCase, parameterized.TestCase):

    def test_every_internal_exists_in_the_installed_versions(self):
        framework.check_internals()
        for name in framework.INTERNALS:
            self.assertIsNotNone(framework.find_internal(name), msg=name)

    def test_the_tested_versions_are_the_requirements_pins(self):
        pins = dict(re.findall(r"^(keras|tensorflow)==(\S+)$",
                               (REPO / "requirements.txt").read_text(), re.MULTILINE))
        self.assertEqual(framework.TESTED_WITH, pins)

    @parameterized.named_parameters(
        ("keras_method", "keras.optimizers.Optimizer._backend_apply_gradients",
         lambda: mock.patch.object(keras.optimizers, "Optimizer", type("Optimizer", (), {}))),
        ("tensorflow_module", "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext",
         lambda: mock.patch.dict(sys.modules, {
             "tensorflow.python.ops.control_flow_util": types.ModuleType("control_flow_util")})),
    )
    def test_a_moved_name_is_named_with_both_versions(self, moved, patch):
        with patch(), self.assertRaises(framework.FrameworkMovedError) as raised:
            framework.check_internals()
        message = str(raised.exception)
        self.assertStartsWith(message, f"{moved} is missing in keras {keras.__version__} / "
                              f"tensorflow {tf.__version__}")
        self.assertIn("tested with keras==3.15.1, tensorflow==2.21.0 (requirements.txt)", message)

    def test_a_missing_module_is_named(self):
        with self.assertRaisesRegex(framework.FrameworkMovedError,
                                    "^no_such_package.module.name is missing in keras"):
            framework.find_internal("no_such_package.module.name")

    def test_a_moved_instance_attribute_is_named_where_it_is_read(self):
        layer = keras.layers.Dropout(0.5)
        object.__delattr__(layer, "_seed_generators")
        with self.assertRaisesRegex(framework.FrameworkMovedError,
                                    r"^keras\.layers\.Layer\._seed_generators is missing"):
            framework.seed_generator_states(layer)
        optimizer = AccumulatingSgd(learning_rate=0.1)
        object.__delattr__(optimizer, "_iterations")
        with self.assertRaisesRegex(framework.FrameworkMovedError,
                                    r"^keras\.optimizers\.Optimizer\._iterations is missing"):
            optimizer.micro_batches  # noqa: B018 - reading it is the test

    def test_no_other_module_uses_a_private_framework_name(self):
        self.assertIn("_flatten_layers", PRIVATE_ATTRIBUTES)
        sources = product_sources()
        self.assertIn(REPO / "training" / "optimization.py", sources)
        found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                 for path in sources
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if PRIVATE_USE.search(line)]
        self.assertEqual(found, [])


class OptimizerWithBatchUpdateTest(tf.test.TestCase):

    def test_batches_accumulate_and_the_schedule_counts_updates(self):
        variable = keras.Variable(np.zeros(2, "float32"))
        optimizer = AccumulatingSgd(learning_rate=SchedulePerUpdate(),
                                    gradient_accumulation_steps=3)
        for _ in range(4):
            optimizer.apply_gradients([(tf.ones(2), variable)])
        self.assertEqual(optimizer.seen_types, {type(variable.value)})
        self.assertEqual(int(optimizer.micro_batches), 4)
        self.assertEqual(int(optimizer.iterations), 1)
        self.assertEqual(float(optimizer.learning_rate), 1.0)  # updates, not micro-batches
        self.assertEqual(optimizer.variable_index(variable), 0)
        self.assertAllEqual(optimizer.gradient_accumulator(variable), [4.0, 4.0])
        self.assertAllEqual(variable, [-10.0, -10.0])  # -(1 + 2 + 3 + 4)

    def test_weight_decay_exclusions_by_name(self):
        kept, decayed = keras.Variable(np.zeros(2), name="bias"), keras.Variable(np.zeros(2))
        optimizer = AccumulatingSgd(learning_rate=0.1)
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        self.assertFalse(optimizer.uses_weight_decay(kept))
        self.assertTrue(optimizer.uses_weight_decay(decayed))

    def test_merge_call_passes_the_strategy(self):
        optimizer = AccumulatingSgd(learning_rate=0.1)
        self.assertEqual(optimizer.merge_call(lambda strategy, x: (strategy, x), 7),
                         (tf.distribute.get_strategy(), 7))


class DropoutLayer(keras.layers.Layer):
    """A layer holding a nested dropout, to check the walk reaches sublayers."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.Dropout(0.5)
        self.again = self.inner  # one generator, listed once

    def call(self, inputs):
        return self.inner(inputs)


class LayersAndSeedsTest(tf.test.TestCase):

    def test_the_walk_reaches_nested_layers_and_lists_each_generator_once(self):
        outer, nested = keras.layers.Dropout(0.1), DropoutLayer()
        model = keras.Sequential([keras.Input((3,)), outer, nested, keras.layers.Dense(2)])
        layers = framework.all_layers(model)
        self.assertIs(layers[0], model)
        self.assertIn(nested.inner, layers)
        states = framework.seed_generator_states(model)
        self.assertEqual([id(state) for state in states],
                         [id(outer.seed_generator.state), id(nested.inner.seed_generator.state)])


class SavedObjectGraphTest(tf.test.TestCase):

    def test_children_map_to_the_key_of_the_first_path_that_saved_them(self):
        value = tf.Variable([1.0, 2.0])
        weights = tf.Module()
        weights.named = {"encoder/kernel": value}
        checkpoint = tf.train.Checkpoint(first=tf.Module(), weights=weights)
        checkpoint.first.holder = [value]
        prefix = checkpoint.write(self.get_temp_dir() + "/ckpt")
        reader = tf.train.load_checkpoint(prefix)

        self.assertIn(framework.OBJECT_GRAPH_KEY, reader.get_variable_to_shape_map())
        children = framework.saved_children(reader, ("weights", "named"))
        self.assertEqual(list(children), ["encoder/kernel"])
        self.assertStartsWith(children["encoder/kernel"], "first/")
        self.assertAllEqual(reader.get_tensor(children["encoder/kernel"]), [1.0, 2.0])
        self.assertEqual(set(framework.saved_children(reader, ())), {"first", "weights"})
        self.assertIsNone(framework.saved_children(reader, ())["weights"])
        with self.assertRaisesRegex(KeyError, "optimizer"):
            framework.saved_children(reader, ("optimizer",))


class CheckpointSaveStepsTest(tf.test.TestCase):

    def _save_failing_at(self, step: str) -> list[str]:
        folder = self.get_temp_dir() + f"/{step}"
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), folder, 2)
        owner, name = framework.CHECKPOINT_SAVE_STEPS[step]
        with mock.patch.object(owner, name, side_effect=RuntimeError("stopped")), \
                self.assertRaisesRegex(RuntimeError, "stopped"):
            manager.save()
        return sorted(tf.io.gfile.listdir(folder))

    def test_each_step_is_where_a_save_writes_what_it_names(self):
        self.assertNotIn("ckpt-1.index", self._save_failing_at("save"))
        written = self._save_failing_at("index")
        self.assertIn("ckpt-1.index", written)
        self.assertNotIn("checkpoint", written)


if __name__ == "__main__":
    tf.test.main()
