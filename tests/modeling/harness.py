"""Checks every layer and model of the project must pass, shared so that each one gets all of them.

A layer or model that only runs is not enough for the runners: they rebuild
models from `get_config` (SavedModel export, `.keras` files), and mixed
precision must change the arithmetic without changing which weights exist.
Each check builds what it needs from a `make(**kwargs)` factory so that the
constructor arguments under test (`dtype=`) go through the real `__init__`.

Models take one input structure (`model(inputs)`); layers take their call's
positional tensors as a tuple (`layer(*inputs)`). A layer is saved to `.keras`
inside a functional model, the only way Keras writes a lone layer with its
weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from unittest import mock

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.framework import all_layers
from tests.fixtures import TestCase

Factory = Callable[..., keras.Layer]


def every_position_call() -> Callable:
    """A `BertEncoder.call` that runs its last block at every position, then gathers
    `output_positions`.

    That is what the encoder computed before it learned to skip the rows its
    callers do not read: the reference for tests that it skips nothing else.
    """
    from network.encoder import BertEncoder
    own_call = BertEncoder.call

    def call(self, inputs, training=None, output_positions=None):
        outputs = own_call(self, inputs, training=training)
        if output_positions is not None:
            outputs["sequence_output"] = tf.gather(
                outputs["sequence_output"], tf.cast(output_positions, tf.int32), axis=1,
                batch_dims=1)
        return outputs

    return call


def outputs_of(network: keras.Layer, inputs: Any) -> Any:
    """The outputs in inference mode as a structure of numpy arrays (a tuple: layer arguments)."""
    outputs = (network(*inputs, training=False) if isinstance(inputs, tuple)
               else network(inputs, training=False))
    return keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)


def _saveable(network: keras.Layer, inputs: Any) -> keras.Model:
    """A model as it is; a layer inside a functional model over its positional arguments."""
    if not isinstance(inputs, tuple):
        return network
    symbolic = [keras.Input(shape=np.shape(x)[1:], batch_size=np.shape(x)[0],
                            dtype=keras.backend.standardize_dtype(np.asarray(x).dtype))
                for x in inputs]
    return keras.Model(symbolic, network(*symbolic), name=f"{network.name}_model")


class KerasTestCase(TestCase, parameterized.TestCase):
    """tf.test.TestCase with the shared layer and model checks as methods."""

    def compute_every_position(self) -> None:
        from network.encoder import BertEncoder
        self.enter_context(mock.patch.object(BertEncoder, "call", every_position_call()))

    def assertSameOutputs(self, expected: Any, actual: Any, what: str) -> None:
        keras.tree.assert_same_structure(expected, actual)
        for want, got in zip(keras.tree.flatten(expected), keras.tree.flatten(actual)):
            self.assertAllEqual(np.asarray(got), np.asarray(want), msg=what)

    def check_output_shapes(self, make: Factory, inputs: Any, expected_shapes: Any) -> None:
        """Output shapes equal `expected_shapes` (a structure like the outputs, of tuples)."""
        shapes = keras.tree.map_structure(lambda array: tuple(array.shape),
                                          outputs_of(make(), inputs))
        self.assertEqual(shapes, expected_shapes)

    def check_config_round_trip(self, make: Factory, inputs: Any) -> None:
        """`from_config(get_config())` builds the same network: same weights, same outputs."""
        network = make()
        expected = outputs_of(network, inputs)
        clone = type(network).from_config(network.get_config())
        self.assertEqual(clone.get_config(), network.get_config())
        outputs_of(clone, inputs)  # builds networks whose weights wait for their first input
        self.assertEqual([w.shape for w in clone.weights], [w.shape for w in network.weights])
        clone.set_weights(network.get_weights())
        self.assertSameOutputs(expected, outputs_of(clone, inputs), "after get_config/from_config")

    def reload(self, network: keras.Layer, inputs: Any, path: Path) -> tuple[keras.Layer, Any]:
        """Saves `network` to the `.keras` file `path` and loads it: the reloaded network (a
        layer is found again inside its model) and its outputs."""
        saved = _saveable(network, inputs)
        saved.save(path)
        restored = keras.saving.load_model(path)
        if saved is network:
            return restored, outputs_of(restored, inputs)
        inner = [layer for layer in restored.layers if layer.name == network.name]
        self.assertLen(inner, 1)
        outputs = restored(list(inputs), training=False)
        return inner[0], keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)

    def check_keras_saving(self, make: Factory, inputs: Any, folder: Path) -> None:
        """A `.keras` file reloads as the same class with the same outputs."""
        network = make()
        expected = outputs_of(network, inputs)
        path = Path(folder) / f"{network.name}.keras"
        restored, actual = self.reload(network, inputs, path)
        self.assertIs(type(restored), type(network))
        self.assertEqual(restored.dtype_policy.name, network.dtype_policy.name)
        self.assertSameOutputs(expected, actual, f"after reloading {path.name}")

    def check_mixed_precision(self, make: Factory, inputs: Any, output_dtypes: Any,
                              folder: Path | None = None) -> None:
        """`dtype="mixed_float16"` alone, under the float32 global policy, gives float16 math.

        Variables stay float32, every LayerNormalization computes in float32 and
        every other Dense/LSTM (sub)layer in float16; outputs have `output_dtypes`
        (a structure like the outputs: float32 logits, float16 hidden states).
        With `folder`, the policy also survives a `.keras` round trip.
        """
        self.assertEqual(keras.config.dtype_policy().name, "float32",
                         msg="the global policy must be float32")
        network = make(dtype="mixed_float16")
        outputs = outputs_of(network, inputs)
        self.assertEqual({variable.dtype for variable in network.weights}, {"float32"})
        layers = all_layers(network)
        norms = [layer for layer in layers if isinstance(layer, keras.layers.LayerNormalization)]
        self.assertTrue(all(layer.compute_dtype == "float32" for layer in norms))
        computing = [layer for layer in layers
                     if isinstance(layer, (keras.layers.Dense, keras.layers.LSTM))]
        self.assertEqual(network.compute_dtype, "float16")
        if isinstance(network, keras.Model):  # every model has Dense heads or blocks
            self.assertNotEmpty(computing)
        self.assertTrue(all(layer.compute_dtype == "float16" for layer in computing))
        dtypes = keras.tree.map_structure(lambda array: str(array.dtype), outputs)
        self.assertEqual(dtypes, output_dtypes)
        if folder is not None:
            path = Path(folder) / f"{network.name}_mixed.keras"
            restored, actual = self.reload(network, inputs, path)
            self.assertEqual(restored.dtype_policy.name, "mixed_float16")
            self.assertSameOutputs(outputs, actual, f"after reloading {path.name}")

    def run_model_test(self, make: Factory, inputs: dict, expected_shapes: Any,
                       output_dtypes: Any) -> None:
        """All of the checks above, for one model."""
        folder = self.create_tempdir().full_path
        self.check_output_shapes(make, inputs, expected_shapes)
        self.check_config_round_trip(make, inputs)
        self.check_keras_saving(make, inputs, folder)
        self.check_mixed_precision(make, inputs, output_dtypes, folder)

    def run_layer_test(self, make: Factory, inputs: tuple, expected_shapes: Any,
                       output_dtypes: Any) -> None:
        """All of the checks above, for one layer called as `layer(*inputs)`."""
        self.run_model_test(make, inputs, expected_shapes, output_dtypes)
