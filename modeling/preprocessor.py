"""Raw text to encoder inputs, as a Keras layer: the piece that lets models take strings.

The layer runs the project's in-graph tokenizer (`FullTokenizer.tokenize_batch`,
the original's ids) and packer (`pack_ragged`, the original's layout and
`_truncate_seq_pair`), so the same object works eagerly, inside
`tf.data.Dataset.map` and inside a SavedModel, and cannot drift from the
runners, which pack with `pack_ids` (a test holds the two together).

The vocabulary is kept in the layer's config rather than as a separate asset
(keras-hub's tokenizers write it beside the weights): `from_config(get_config())`
then gives a working copy on its own, so `keras.models.clone_model` and a
task's `from_config` need no file, and a `.keras` file stores it compressed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_flag, check_integer
from core.record_schema import ENCODER_INPUTS
from network.model_folder import check_source
from network.pretrained import load_config, load_tokenizer, model_files
from text.graph_checks import rows_differ, same_row_lengths
from text.sentence_pairs import pack_ragged
from text.tokenization import FullTokenizer

DEFAULT_SEQUENCE_LENGTH = 128  # keras-hub's and the runners' default


def default_sequence_length(config) -> int:
    """The positions a model's text is packed to when no one says: 128, or fewer where the
    model has fewer positions (`max_position_embeddings`)."""
    return min(DEFAULT_SEQUENCE_LENGTH, config.max_position_embeddings)


@keras.saving.register_keras_serializable(package="bert")
class BertPreprocessor(keras.layers.Layer):
    """Strings, or a pair `(texts_a, texts_b)`, -> `input_ids`, `input_mask`, `segment_ids`.

    Each is int32 [N, sequence_length]. A batch may also be given as rows of
    pairs (`[("a", "b"), ...]`); a scalar string (an unbatched dataset element)
    gives [sequence_length] rows. A pair whose second text has no token packs
    as a single text, as the runners do. `sequence_length` is an integer of at
    least 3 ([CLS], a token, [SEP]); `from_pretrained` also holds it to the
    model's `max_position_embeddings` (`BertConfig.check_sequence_length`).

    Args:
      vocabulary: the WordPiece tokens, in id order.
      do_lower_case: lowercase and strip accents first (an uncased model).
      sequence_length: tokens per packed row, [CLS] and [SEP] included.
      **kwargs: Keras layer arguments (`name`).

    Examples:

    >>> preprocessor = BertPreprocessor.from_pretrained("uncased_L-12_H-768_A-12", 8)
    >>> preprocessor([("a question", "a context")])["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1, 1, 0]]
    """

    def __init__(self, vocabulary: Sequence[str], do_lower_case: bool = True,
                 sequence_length: int = DEFAULT_SEQUENCE_LENGTH, **kwargs: Any):
        kwargs.setdefault("name", "bert_preprocessor")
        # Outputs are ids whatever the model computes in; a float policy would be misleading.
        kwargs.setdefault("dtype", "int32")
        # [CLS], a token, [SEP]; a model's own limit is its config's (`load_preprocessor`).
        sequence_length = check_integer("sequence_length", sequence_length, minimum=3)
        check_flag("do_lower_case", do_lower_case)
        if not isinstance(vocabulary, (list, tuple, np.ndarray)) or not all(
                isinstance(token, str) for token in vocabulary):
            raise TypeError("vocabulary must be a list of WordPiece tokens (str) in id order, "
                            f"got {type(vocabulary).__name__}"
                            + (" holding other values" if isinstance(vocabulary, (list, tuple))
                               else ""))
        super().__init__(trainable=False, **kwargs)
        self.sequence_length = sequence_length
        self.tokenizer = FullTokenizer(f"the vocabulary of layer {self.name!r}",
                                       do_lower_case=do_lower_case, tokens=vocabulary)
        # Strings are not backend tensors: let them through as given.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @property
    def vocabulary(self) -> list[str]:
        tokens = self.tokenizer.inv_vocab
        return [tokens[index] for index in range(len(tokens))]

    def call(self, inputs) -> dict[str, tf.Tensor]:
        texts_a, texts_b = split_segments(inputs)
        scalar = texts_a.shape.rank == 0
        if scalar:
            texts_a = texts_a[None]
            texts_b = None if texts_b is None else texts_b[None]
        with tf.device("cpu"):  # string ops have no accelerator kernels
            ids_a, _ = self.tokenizer.tokenize_batch(texts_a)
            ids_b = None if texts_b is None else self.tokenizer.tokenize_batch(texts_b)[0]
            packed = pack_ragged(ids_a, ids_b, self.sequence_length, self.tokenizer.cls_id,
                                 self.tokenizer.sep_id, names=("texts_a", "texts_b"))
        return {key: value[0] for key, value in packed.items()} if scalar else packed

    def pack_words(self, words: tf.RaggedTensor, word_labels: tf.RaggedTensor | None = None
                   ) -> tuple[dict[str, tf.Tensor], tf.RaggedTensor, tf.Tensor | None]:
        """Sentences given as words [N, (words)] -> (encoder inputs, word starts, token labels).

        Each word is tokenized alone, as the tagging runners do (a word with
        no sub-token becomes [UNK]), and the sentence keeps its first
        `sequence_length - 2` sub-tokens. Word starts [N, (words)] give the
        row position of each word's first sub-token, where its tag is read,
        or -1 for a word cut off. Token labels [N, sequence_length] carry
        `word_labels` at those positions and -1 elsewhere (no loss there);
        `word_labels` must hold one label per word, else an InvalidArgumentError.
        """
        if word_labels is not None:
            words, word_labels = same_row_lengths(words, word_labels, ("words", "word_labels"))
        with tf.device("cpu"):
            word_pieces = self.word_pieces(words)
            tokens = word_pieces.merge_dims(1, 2)
            first_piece = word_pieces.values.row_splits[:-1]  # in the flat list of sub-tokens
            start = first_piece - tf.repeat(tokens.row_splits[:-1], words.row_lengths())
            kept = start < self.sequence_length - 2
            starts = words.with_flat_values(tf.where(kept, tf.cast(start, tf.int32) + 1, -1))
            packed = pack_ragged(tokens, None, self.sequence_length, self.tokenizer.cls_id,
                                 self.tokenizer.sep_id)
            if word_labels is None:
                return packed, starts, None
            flat_labels = tf.tensor_scatter_nd_update(
                tf.fill(tf.shape(tokens.flat_values), -1), first_piece[:, None],
                tf.cast(word_labels.flat_values, tf.int32))
            labels = tokens.with_flat_values(flat_labels)[:, :self.sequence_length - 2]
            edge = tf.fill([labels.nrows(), 1], -1)
            labels = tf.concat([edge, labels, edge], axis=1).to_tensor(
                -1, shape=[None, self.sequence_length])
            return packed, starts, labels

    def pack_question_words(self, questions: tf.Tensor, context_words: tf.RaggedTensor
                            ) -> tuple[dict[str, tf.Tensor], tf.RaggedTensor]:
        """`[CLS] question [SEP] context [SEP]`, the context given as words [N, (words)].

        Each context word is tokenized alone, as the SQuAD runner does, so an
        answer span maps back to whole words; a word with no sub-token (a lone
        U+3000) takes no position, as there. Also returns the context's
        sub-tokens by word [N, (words), (pieces)], before truncation.
        """
        with tf.device("cpu"):
            question_ids, _ = self.tokenizer.tokenize_batch(questions)
            pieces, _ = self.tokenizer.tokenize_batch(context_words.flat_values)
            word_pieces = tf.RaggedTensor.from_row_splits(pieces, context_words.row_splits)
            return pack_ragged(question_ids, word_pieces.merge_dims(1, 2), self.sequence_length,
                               self.tokenizer.cls_id, self.tokenizer.sep_id,
                               names=("questions", "context_words")), word_pieces

    def word_pieces(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
        """Sub-tokens of each word [N, (words), (pieces)]; a word with none becomes [UNK],
        as in the tagging runners, so every word keeps a position."""
        pieces, _ = self.tokenizer.tokenize_batch(words.flat_values)
        no_piece = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(no_piece)], self.tokenizer.unk_id), no_piece)
        pieces = tf.concat([pieces, unknown], axis=1)
        return tf.RaggedTensor.from_nested_row_splits(
            pieces.flat_values, (words.row_splits, pieces.row_splits))

    def compute_output_spec(self, inputs) -> dict[str, keras.KerasTensor]:
        return {key: keras.KerasTensor((None, self.sequence_length), "int32")
                for key in ENCODER_INPUTS}

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike, sequence_length: int | None = None,
                        do_lower_case: bool | None = None, **settings: Any) -> "BertPreprocessor":
        """The preprocessor for the model in `source`: its vocabulary and casing.

        Casing comes from the folder as `load_tokenizer` decides it, unless
        `do_lower_case` is given: an uncased model fed cased pieces sees [UNK].
        `sequence_length` must fit the position embeddings of the config beside
        `source`, when there is one: longer rows would index past them.

        Args:
          source: a model name, folder or checkpoint, as the models'
            `from_pretrained` take it.
          sequence_length: tokens per packed row, [CLS] and [SEP] included;
            None: 128 (keras-hub's and the runners' default), or the model's
            `max_position_embeddings` when that is smaller.
          do_lower_case: True or False to override the folder's casing.
          **settings: a task preprocessor's own arguments (`num_labels=2`).

        Examples:

        >>> preprocessor = BertPreprocessor.from_pretrained("uncased_L-12_H-768_A-12", 64)
        >>> preprocessor(["a fine film"])["input_ids"].shape
        TensorShape([1, 64])
        """
        check_source(source, "source")
        if do_lower_case is not None and not isinstance(do_lower_case, bool):
            raise TypeError(f"do_lower_case must be True, False or None (the folder's "
                            f"casing), got {do_lower_case!r}")
        if model_files(source)[0] is not None:
            config = load_config(source)
            if sequence_length is None:
                sequence_length = default_sequence_length(config)
            sequence_length = config.check_sequence_length(sequence_length)
        elif sequence_length is None:
            sequence_length = DEFAULT_SEQUENCE_LENGTH
        tokenizer = load_tokenizer(source, do_lower_case=do_lower_case)
        tokens = tokenizer.inv_vocab
        return cls([tokens[index] for index in range(len(tokens))],
                   do_lower_case=tokenizer.do_lower_case, sequence_length=sequence_length,
                   **settings)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("trainable", None)
        config.update(vocabulary=self.vocabulary, do_lower_case=self.tokenizer.do_lower_case,
                      sequence_length=self.sequence_length)
        return config


def load_preprocessor(source: str | os.PathLike, sequence_length: int | None = None,
                      do_lower_case: bool | None = None) -> BertPreprocessor:
    """`BertPreprocessor.from_pretrained(source, sequence_length, do_lower_case)`.

    Args:
      source: a model name, folder or checkpoint.
      sequence_length: tokens per packed row; None: 128, or fewer when the
        model has fewer positions.
      do_lower_case: True or False to override the folder's casing.

    Examples:

    >>> load_preprocessor("uncased_L-12_H-768_A-12").sequence_length
    128
    """
    return BertPreprocessor.from_pretrained(source, sequence_length, do_lower_case)


def ragged_words(sentences) -> tf.RaggedTensor:
    """Sentences as lists of words -> [N, (words)] strings (empty sentences allowed)."""
    if isinstance(sentences, tf.RaggedTensor):
        return sentences
    if not isinstance(sentences, (list, tuple, np.ndarray)):
        raise TypeError(f"sentences must be a list of sentences, each a list of words (str), "
                        f"got {type(sentences).__name__}")
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, (list, tuple, np.ndarray)):
            raise TypeError(f"sentence {index} is a {type(sentence).__name__}: a tagger takes "
                            "each sentence as a list of words (str)")
        for position, word in enumerate(sentence):
            if not isinstance(word, (str, bytes)):
                raise TypeError(f"sentence {index}, word {position} is {word!r}: words must "
                                "be strings")
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([word for sentence in sentences for word in sentence], tf.string),
        [len(sentence) for sentence in sentences])


def split_segments(inputs) -> tuple[tf.Tensor, tf.Tensor | None]:
    """(texts_a, texts_b or None) as string tensors from any of the accepted input forms.

    A tuple is a pair of columns; a list of 2-item tuples or lists is rows of
    pairs; anything else is one column of single texts.
    """
    if isinstance(inputs, dict):
        raise TypeError("BertPreprocessor takes strings, not a dict; packed inputs "
                        f"({', '.join(sorted(inputs))}) go to the model directly")
    if isinstance(inputs, list) and inputs and all(
            isinstance(row, (tuple, list)) for row in inputs):
        lengths = sorted({len(row) for row in inputs})
        if lengths != [2]:
            raise ValueError(f"rows of texts must be (text_a, text_b) pairs; got rows of "
                             f"{', '.join(map(str, lengths))} items")
        inputs = tuple(zip(*inputs))
    if isinstance(inputs, tuple):
        if len(inputs) == 1:
            return _strings(inputs[0]), None
        if len(inputs) != 2:
            raise ValueError(f"a tuple of texts must be (texts_a, texts_b); got {len(inputs)} "
                             "segments, and BERT packs at most two")
        texts_a, texts_b = _strings(inputs[0]), _strings(inputs[1])
        if texts_a.shape.rank != texts_b.shape.rank:
            raise ValueError(f"texts_a and texts_b differ in rank: {texts_a.shape} and "
                             f"{texts_b.shape}")
        if texts_a.shape.rank == 1 and None not in (texts_a.shape[0], texts_b.shape[0]) and (
                texts_a.shape[0] != texts_b.shape[0]):
            raise ValueError(rows_differ("texts_a", "texts_b", texts_a.shape[0],
                                         texts_b.shape[0]))
        return texts_a, texts_b
    return _strings(inputs), None


def _strings(texts) -> tf.Tensor:
    try:  # the hint makes an empty list an empty batch of strings
        tensor = tf.convert_to_tensor(texts, dtype_hint=tf.string)
    except (TypeError, ValueError) as error:
        raise TypeError(f"expected strings (str or bytes), got {type(texts).__name__}: "
                        f"{error}") from None
    if tensor.dtype != tf.string:
        raise TypeError(f"expected strings, got {tensor.dtype.name} values")
    if tensor.shape.rank is not None and tensor.shape.rank > 1:
        raise ValueError(f"expected a batch of strings [N], got shape {tensor.shape}")
    return tensor
