"""Checks every model of the project must pass, shared so that each model gets all of them.

A model that only runs is not enough for the runners: they rebuild models
from `get_config` (SavedModel export, `.keras` files), and mixed precision
must change the arithmetic without changing which weights exist. Each check
builds what it needs from a `make(**kwargs)` factory so that the constructor
arguments under test (`dtype=`) go through the real `__init__`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import keras
import numpy as np

Factory = Callable[..., keras.Model]


def compute_every_position(monkeypatch) -> None:
    """Make `BertEncoder` run its last block at every position and gather `output_positions`.

    That is what the encoder computed before it learned to skip the rows its
    callers do not read: the reference for tests that it skips nothing else.
    """
    import tensorflow as tf

    from modeling.encoder import BertEncoder
    own_call = BertEncoder.call

    def call(self, inputs, training=None, output_positions=None):
        outputs = own_call(self, inputs, training=training)
        if output_positions is not None:
            outputs["sequence_output"] = tf.gather(
                outputs["sequence_output"], tf.cast(output_positions, tf.int32), axis=1,
                batch_dims=1)
        return outputs

    monkeypatch.setattr(BertEncoder, "call", call)


def outputs_of(model: keras.Model, inputs: dict) -> Any:
    """The model's outputs in inference mode as a structure of numpy arrays."""
    return keras.tree.map_structure(keras.ops.convert_to_numpy, model(inputs, training=False))


def assert_same_outputs(expected: Any, actual: Any, what: str) -> None:
    keras.tree.assert_same_structure(expected, actual)
    for want, got in zip(keras.tree.flatten(expected), keras.tree.flatten(actual)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=what)


def check_output_shapes(make: Factory, inputs: dict, expected_shapes: Any) -> None:
    """Output shapes equal `expected_shapes` (a structure like the outputs, of tuples)."""
    shapes = keras.tree.map_structure(lambda array: tuple(array.shape),
                                      outputs_of(make(), inputs))
    assert shapes == expected_shapes


def check_config_round_trip(make: Factory, inputs: dict) -> None:
    """`from_config(get_config())` builds the same network: same weights, same outputs."""
    model = make()
    expected = outputs_of(model, inputs)
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    outputs_of(clone, inputs)  # builds models whose weights wait for their first input
    assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
    clone.set_weights(model.get_weights())
    assert_same_outputs(expected, outputs_of(clone, inputs), "after get_config/from_config")


def check_keras_saving(make: Factory, inputs: dict, folder: Path) -> None:
    """A `.keras` file reloads as the same class with the same outputs."""
    model = make()
    expected = outputs_of(model, inputs)
    path = folder / f"{model.name}.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    assert restored.dtype_policy.name == model.dtype_policy.name
    assert_same_outputs(expected, outputs_of(restored, inputs), f"after reloading {path.name}")


def check_mixed_precision(make: Factory, inputs: dict, output_dtypes: Any,
                          folder: Path | None = None) -> None:
    """`dtype="mixed_float16"` alone, under the float32 global policy, gives float16 math.

    Variables stay float32, every LayerNormalization computes in float32 and
    every other Dense/LSTM sublayer in float16; outputs have `output_dtypes`
    (a structure like the outputs: float32 logits, float16 hidden states).
    With `folder`, the policy also survives a `.keras` round trip.
    """
    assert keras.config.dtype_policy().name == "float32", "the global policy must be float32"
    model = make(dtype="mixed_float16")
    outputs = outputs_of(model, inputs)
    assert {variable.dtype for variable in model.weights} == {"float32"}
    # Keras has no public walk over nested sublayers; this is the one it uses itself.
    layers = list(model._flatten_layers(include_self=False))
    norms = [layer for layer in layers if isinstance(layer, keras.layers.LayerNormalization)]
    assert all(layer.compute_dtype == "float32" for layer in norms)
    computing = [layer for layer in layers
                 if isinstance(layer, (keras.layers.Dense, keras.layers.LSTM))]
    assert computing and all(layer.compute_dtype == "float16" for layer in computing)
    dtypes = keras.tree.map_structure(lambda array: str(array.dtype), outputs)
    assert dtypes == output_dtypes
    if folder is not None:
        path = folder / f"{model.name}_mixed.keras"
        model.save(path)
        restored = keras.saving.load_model(path)
        assert restored.dtype_policy.name == "mixed_float16"
        assert_same_outputs(outputs, outputs_of(restored, inputs),
                            f"after reloading {path.name}")


def run_model_test(make: Factory, inputs: dict, expected_shapes: Any, output_dtypes: Any,
                   folder: Path) -> None:
    """All of the checks above, for one model."""
    check_output_shapes(make, inputs, expected_shapes)
    check_config_round_trip(make, inputs)
    check_keras_saving(make, inputs, folder)
    check_mixed_precision(make, inputs, output_dtypes, folder)
