"""Sentence embeddings: one vector per text, pooled from the encoder's token vectors.

A sentence-transformers folder (the MiniLM this project loads is one) says
how its vectors are made: which pooling ([CLS], max, mean, mean/sqrt(length)),
whether they are L2-normalized, and how many tokens the model reads
(`network.sentence_transformers_folder`). `BertTextEmbedder.from_pretrained`
follows those files, so its vectors are sentence-transformers' own for that
folder; keras-hub's `BertTextEmbedder` offers the same for its presets.

Pooling reads only the text's own positions, as sentence-transformers does:
mean pooling sums the vectors under the input mask and divides by the
mask's count (clamped at 1e-9), max pooling takes each dimension's maximum
over those positions, and [CLS] pooling the first position. Rows here are
padded to `sequence_length` (sentence-transformers pads to the longest in
the batch); the mask keeps the padding out of every pooled vector, so the
two give the same numbers.
"""

from __future__ import annotations

import os
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from core.arguments import check_integer
from core.record_schema import ENCODER_INPUTS
from modeling.preprocessor import BertPreprocessor, load_preprocessor
from modeling.text_arguments import check_packed
from network.checkpoints import load_weights
from network.config import BertConfig, ConfigError
from network.encoder import BertEncoder
from network.layers.settings import ConfigurableModel
from network.model_folder import check_source
from network.presets import resolve
from network.pretrained import load_config
from network.sentence_transformers_folder import POOLING_KEYS, read_sentence_settings
from network.serving_spec import ServingSpec, text_inputs

POOLING_MODES = tuple(POOLING_KEYS)
_DEFAULT_BATCH_SIZE = 32


@keras.saving.register_keras_serializable(package="bert")
class BertTextEmbedder(ConfigurableModel):
    """Texts -> vectors [N, hidden_size x len(pooling)]: the encoder, then pooling, then L2.

    Args:
      config: the encoder's `BertConfig`.
      pooling: a mode or a list of them, each one of "cls", "max", "mean",
        "mean_sqrt_len_tokens"; several are concatenated in the order given.
      normalize: divide each vector by its L2 norm (cosine similarity is then a dot product).
      preprocessor: a `BertPreprocessor`, so that `predict` takes strings.

    Examples:

    ```python
    embedder = modeling.BertTextEmbedder.from_pretrained("path/to/all-MiniLM-L6-v2")
    vectors = embedder.predict(["a fine film", "a great movie"])  # [2, 384]
    embedder.similarity(["a fine film"], ["a great movie", "the tax law"])  # [1, 2] cosines
    ```
    """

    def __init__(self, config: BertConfig, pooling: str | list[str] = "mean",
                 normalize: bool = False, preprocessor: BertPreprocessor | dict | None = None,
                 **kwargs: Any):
        kwargs.setdefault("name", "bert_text_embedder")
        pooling = check_pooling(pooling)
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True or False, got {normalize!r}")
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        if preprocessor is not None and not isinstance(preprocessor, BertPreprocessor):
            raise TypeError(f"preprocessor must be a BertPreprocessor or None, got "
                            f"{type(preprocessor).__name__}")
        if preprocessor is not None:
            config.check_sequence_length(preprocessor.sequence_length)
        super().__init__(**kwargs)
        self.keep_settings(config=config, pooling=pooling, normalize=normalize)
        self.preprocessor = preprocessor
        self.encoder = BertEncoder(config, name="bert", dtype=self.dtype_policy)
        self.embedding_size = config.hidden_size * len(pooling)
        self._embed_texts = None  # the traced strings -> vectors function, made on first use
        self.built = True

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike, sequence_length: int | None = None,
                        pooling: str | list[str] | None = None, normalize: bool | None = None,
                        do_lower_case: bool | None = None, **kwargs: Any) -> "BertTextEmbedder":
        """The embedder of the model in `source`, pooling as its sentence-transformers files say.

        Args:
          source: a model folder or name. A sentence-transformers folder
            (`modules.json`) gives the pooling, the normalization and the
            default `sequence_length` (`sentence_bert_config.json`'s
            `max_seq_length`); any other BERT folder pools by mean, unnormalized.
          sequence_length: tokens read per text, [CLS] and [SEP] included;
            longer texts are cut. Default: the folder's, else 128.
          pooling: overrides the folder's pooling (see the class).
          normalize: overrides the folder's normalization.
          do_lower_case: overrides the folder's casing.
          **kwargs: to the model (`dtype=...`, `name=...`).

        Raises:
          ConfigError: a folder whose modules or pooling are not reproduced here.
          ValueError, TypeError: a bad argument, named, before TensorFlow runs.
        """
        check_source(source, "source")
        if pooling is not None:
            pooling = check_pooling(pooling)
        if normalize is not None and not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True, False or None (the folder's), got "
                            f"{normalize!r}")
        if do_lower_case is not None and not isinstance(do_lower_case, bool):
            raise TypeError(f"do_lower_case must be True, False or None (the folder's), got "
                            f"{do_lower_case!r}")
        if sequence_length is not None:
            sequence_length = check_integer("sequence_length", sequence_length, minimum=3)
        folder = resolve(source)
        settings = read_sentence_settings(folder) if folder.is_dir() else None
        model_folder = settings.model_folder if settings else folder
        config = load_config(model_folder)
        if sequence_length is None and settings and settings.max_seq_length:
            sequence_length = min(settings.max_seq_length, config.max_position_embeddings)
        preprocessor = load_preprocessor(model_folder, sequence_length, do_lower_case)
        if settings and settings.lowercases_text and not preprocessor.tokenizer.do_lower_case:
            raise ConfigError(f"{folder}: sentence_bert_config.json lowercases text before a "
                              "cased tokenizer, which BertTextEmbedder does not reproduce; pass "
                              "do_lower_case=True to lowercase (and strip accents)")
        model = cls(config,
                    pooling=pooling or (settings.pooling if settings else "mean"),
                    normalize=normalize if normalize is not None else bool(
                        settings and settings.normalize),
                    preprocessor=preprocessor, **kwargs)
        report = load_weights(model, model_folder)
        lacking = [name for name in report.missing if not name.startswith("bert/pooler/")]
        if lacking:  # the pooler is not read; any other weight left random would be noise
            raise ConfigError(f"{model_folder}: the checkpoint lacks {len(lacking)} encoder "
                              f"weights ({', '.join(lacking[:3])}...), so vectors would be noise")
        return model

    def call(self, features, training=None):
        inputs = {key: features[key] for key in ENCODER_INPUTS if key in features}
        sequence = ops.cast(self.encoder(inputs, training=training)["sequence_output"],
                            "float32")
        # expand_dims, not [:, :, None]: TFLite has no strided slice that adds an axis.
        mask = ops.expand_dims(ops.cast(inputs["input_mask"], "float32"), -1)
        vectors = ops.concatenate([pool(mode, sequence, mask) for mode in self.pooling], -1)
        if self.normalize:  # torch.nn.functional.normalize: x / max(||x||, 1e-12)
            norm = ops.sqrt(ops.sum(ops.square(vectors), axis=-1, keepdims=True))
            vectors = vectors / ops.maximum(norm, 1e-12)
        return vectors

    def predict(self, x, batch_size: int | None = None, **kwargs: Any) -> np.ndarray:
        """Vectors [N, `embedding_size`] for `x`: a list of strings, or packed inputs.

        Args:
          x: texts (a list, tuple or array of str), or a dict of packed
            `input_ids`, `input_mask`, `segment_ids` (given to Keras' `predict`).
          batch_size: texts per step (default 32).
          **kwargs: Keras' `predict` arguments, for packed inputs.
        """
        batch_size = _DEFAULT_BATCH_SIZE if batch_size is None else check_integer(
            "batch_size", batch_size)
        if isinstance(x, dict):
            check_packed(x)
            return super().predict(x, batch_size=batch_size, **kwargs)
        texts = check_texts(x, "x")
        if self.preprocessor is None:
            raise ValueError(f"{self.name} has no preprocessor, so it takes packed inputs "
                             f"({', '.join(ENCODER_INPUTS)}); build it with from_pretrained "
                             "to embed text")
        if not texts:
            return np.zeros((0, self.embedding_size), np.float32)
        if self._embed_texts is None:
            self._embed_texts = tf.function(
                lambda batch: self(self.preprocessor(batch), training=False),
                input_signature=[tf.TensorSpec([None], tf.string)])
        return np.concatenate([self._embed_texts(tf.constant(texts[start:start + batch_size]))
                               .numpy() for start in range(0, len(texts), batch_size)])

    def similarity(self, a, b, batch_size: int | None = None) -> np.ndarray:
        """Cosine similarities [len(a), len(b)] between texts (or vectors) `a` and `b`.

        Args:
          a, b: lists of texts, embedded with `predict`, or arrays of vectors [N, D].
          batch_size: as for `predict`.
        """
        return cosine_similarity(*(
            value if isinstance(value, np.ndarray) and value.dtype.kind == "f"
            else self.predict(check_texts(value, name), batch_size)
            for name, value in (("a", a), ("b", b))))

    def checkpoint_variables(self) -> dict:
        return self.encoder.checkpoint_variables()

    def serving_spec(self) -> ServingSpec:
        """What the embedder serves (`network.serving_spec`): a vector per text."""
        return ServingSpec("embedder", ("embedding",), **text_inputs(self.preprocessor))

    def get_config(self) -> dict:
        config = super().get_config()
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config


def pool(mode: str, sequence, mask):
    """One pooling of `sequence` [N, T, H] under `mask` [N, T, 1] (1.0 for the text's tokens)."""
    if mode == "cls":
        return sequence[:, 0]
    if mode == "max":
        return ops.max(ops.where(mask > 0, sequence, float("-inf")), axis=1)
    total = ops.sum(sequence * mask, axis=1)
    count = ops.maximum(ops.sum(mask, axis=1), 1e-9)
    return total / (count if mode == "mean" else ops.sqrt(count))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[len(a), len(b)] cosines between the rows of `a` and `b` (each scaled by max(norm, 1e-12)).

    Args:
      a, b: arrays of vectors [N, D] and [M, D].
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must be vectors [N, D] and [M, D] of one width, got shapes "
                         f"{a.shape} and {b.shape}")
    for name, rows in (("a", a), ("b", b)):
        if not np.isfinite(rows).all():
            row = int(np.argwhere(~np.isfinite(rows))[0][0])
            raise ValueError(f"{name}: vector {row} holds NaN or infinity, which has no cosine")

    def unit(rows: np.ndarray) -> np.ndarray:
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)

    return (unit(a) @ unit(b).T).astype(np.float32)


def check_pooling(pooling: Any) -> list[str]:
    """`pooling` as a non-empty list of modes of POOLING_MODES, each once."""
    modes = [pooling] if isinstance(pooling, str) else pooling
    if not isinstance(modes, (list, tuple)) or not modes or any(
            mode not in POOLING_MODES for mode in modes) or len(set(modes)) != len(modes):
        raise ValueError(f"pooling must be one of {', '.join(POOLING_MODES)} or a list of "
                         f"distinct ones, got {pooling!r}")
    return list(modes)


def check_texts(x: Any, argument: str) -> list[str]:
    """`x` as a list of str; a bare string (a sequence of characters) is refused."""
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{argument} must be a list of texts, got one {type(x).__name__}: "
                        f"wrap it as [{argument}]")
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if not isinstance(x, (list, tuple)):
        raise TypeError(f"{argument} must be a list of texts, got {type(x).__name__}")
    for index, text in enumerate(x):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"{argument}[{index}] must be a str, got {type(text).__name__}: "
                            f"{text!r}")
    return list(x)
