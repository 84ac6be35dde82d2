"""`model.quantize("int8")` for the encoder and every task model, and their saved configs.

Keras' `Model.quantize` offers each single layer its `quantize` and warns
for every layer without one, so here it warned for each LayerNorm and
dropout, skipped attention (a layer with a sublayer is never offered) and
quantized nothing (Keras' `Dense.quantize` refuses subclasses). These
models quantize every projection that has an int8 form here (`Dense`,
attention, the task heads' `OutputProjection`; see
`network.layers.int8`), and pass over the rest, which has nothing to
quantize or stays float: embeddings (a lookup, not a product), LayerNorm,
dropout, a BiLSTM, the masked-LM output tied to the embedding table and
the next-sentence head.

A model's own layers are built by its constructor, not from their saved
configs, so the model's config records that it was quantized; loading
rebuilds the float model, quantizes it and then reads the int8 weights.
"""

from __future__ import annotations

import contextlib
import gc

import keras

from core.arguments import FieldError
from core.framework import all_layers, unwrap_quantize
from network.layers import fast_paths, int8

_CONFIG_KEY = "quantization_mode"


def quantizable_layers(model: keras.Layer) -> list[keras.Layer]:
    """The layers under `model` that have an int8 form here, in Keras' order."""
    return [layer for layer in all_layers(model) if isinstance(layer, int8.Quantizable)]


def is_quantized(model: keras.Layer) -> bool:
    """Whether any projection under `model` is quantized (a call with training=True is refused)."""
    return any(layer.quantization_mode is not None for layer in quantizable_layers(model))


def portable_tracing(model: keras.Layer) -> contextlib.AbstractContextManager:
    """Where to trace `model` for an export on ids: an int8 model with the plain int8 product.

    XLA compiles that one (to an int8 dot) and it needs no oneDNN where the
    export loads; oneDNN's kernel, the fast path outside XLA, is neither.
    A float model keeps its fast paths, which XLA and TFLite take as they are.
    """
    return fast_paths.disabled() if is_quantized(model) else contextlib.nullcontext()


class QuantizableModel:
    """Mixin for a `keras.Model` whose layers quantize: `quantize`, `get_config`, `from_config`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        unwrap_quantize(self)  # its checks are below; it stays open for `compile`

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantizes every projection to int8 (see the module docstring); for inference only.

        Args:
            mode: "int8", the only mode here (or None with a `config`).
            config: None, or a default `keras.quantizers.Int8QuantizationConfig`.
            filters: must be None; every projection is quantized, so that a saved
                model can be rebuilt the same way.
        """
        if kwargs:
            raise ValueError(f"{self.name}.quantize: unknown arguments {sorted(kwargs)}")
        if filters is not None:
            raise ValueError(f"{self.name}.quantize: filters={filters!r} is not supported; "
                             "every projection is quantized, so pass filters=None")
        if mode is None and config is not None:
            mode = getattr(config, "mode", None)
        int8.check_request(self, mode, config)
        if self.compute_dtype == "float16":  # Keras refuses it for its own layers too
            raise ValueError(f"{self.name}: int8 needs a float32 or bfloat16 compute dtype, "
                             f"but the model's dtype policy is {self.dtype_policy.name!r}")
        layers = quantizable_layers(self)
        pending = [layer for layer in layers if layer.quantization_mode is None]
        if layers and not pending:
            raise ValueError(f"{self.name} is already quantized ({mode}); quantize a float "
                             "copy of the model instead")
        # Keras collects garbage after each weight a layer deletes (a float kernel
        # here), about 0.4 s each with TensorFlow loaded; with everything older
        # frozen, each collection only looks at what quantizing created.
        gc.freeze()
        try:
            for layer in pending:
                layer.quantize(mode, config=config)
        finally:
            gc.unfreeze()
        # Functions Keras traced before hold the float weights.
        self.train_function = self.test_function = self.predict_function = None

    def get_config(self) -> dict:
        config = super().get_config()
        modes = {layer.quantization_mode for layer in quantizable_layers(self)}
        if len(modes) > 1:
            raise ValueError(f"{self.name} has some projections quantized and others not, "
                             "which a saved config cannot rebuild; call "
                             f"{self.name}.quantize('int8') to quantize the rest first")
        mode = modes.pop() if modes else None
        if mode is not None:
            config[_CONFIG_KEY] = mode
        return config

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        mode = config.pop(_CONFIG_KEY, None)
        model = super().from_config(config)
        if mode is not None:
            model.quantize(mode)
        return model


def check_quantize(quantize: str | None, format_name: str, float_output: str | None) -> None:
    """Refuses an export's `quantize` that is not "int8", or is asked of a format that cannot
    hold int8 weights (`float_output` says what that format writes; None: it can).

    Args:
      quantize: None (float export) or the mode asked for.
      format_name: the export's format, for the message.
      float_output: what the format writes instead of an int8 SavedModel, or None.
    """
    if quantize is None:
        return
    if quantize != int8.MODE:
        raise FieldError("{quantize} must be {0!r} (or unset), got {1!r}", int8.MODE, quantize)
    if float_output is not None:
        raise FieldError("{quantize}={0!r} exports int8 SavedModels; the {1!r} format writes "
                         "{2}, so leave {quantize} unset for it", quantize, format_name,
                         float_output)
