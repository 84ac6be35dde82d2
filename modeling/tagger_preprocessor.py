"""The tagger's preprocessor: sentences as words in, windows with each word's tag out.

A word's tag is read at its first sub-token, as the runners train and score
it; the other positions carry no loss (sample weight 0). A sentence longer
than one window is read through windows `window_stride` sub-tokens apart,
each word trained and scored in the one where it has the most context
(`text.text_windows`), so every word is seen: nothing is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer
from modeling.labels import check_label_names, tag_indices
from modeling.preprocessor import DEFAULT_SEQUENCE_LENGTH, ragged_words
from modeling.task_preprocessor import TaskPreprocessor
from text.tag_schemes import check_aligned
from text.text_windows import EXAMPLE_WINDOWS, WORD_POSITIONS, stride_for, word_windows
from text.whitespace_words import split_words


@keras.saving.register_keras_serializable(package="bert")
class BertTaggerPreprocessor(TaskPreprocessor):
    """Sentences (lists of words) and their tags -> a tagger's windows.

    `preprocessor(words)` gives the windows with `word_positions`, where the
    model reads each word's logits; `preprocessor(words, tags, sample_weight)`
    gives (windows, a tag per position, weights), the weights 0 where no
    word starts. `text_columns` checks Python sentences and tags first.

    Args:
      vocabulary: the WordPiece tokens, in id order.
      do_lower_case: lowercase and strip accents first (an uncased model).
      sequence_length: tokens per window, [CLS] and [SEP] included.
      num_labels: tags. None: as many as `label_names`, or none, so tags are
        refused (a model sets it).
      label_names: a name per tag, in order, so tags may be given by name.
      window_stride: sub-tokens between the starts of a long sentence's
        windows (default: half a window).
      **kwargs: Keras layer arguments (`name`).

    Examples:

    >>> preprocessor = BertTaggerPreprocessor.from_pretrained(
    ...     "cased_L-12_H-768_A-12", 16, label_names=["O", "B-PER"])
    >>> features, tags, weights = preprocessor(
    ...     *preprocessor.text_columns([["John", "sleeps"]], [["B-PER", "O"]]))
    >>> tags.numpy()[0, :3].tolist(), weights.numpy()[0, :3].tolist()
    ([0, 1, 0], [0.0, 1.0, 1.0])
    """

    SETTINGS = ("num_labels", "label_names", "window_stride")

    def __init__(self, vocabulary: Sequence[str], do_lower_case: bool = True,
                 sequence_length: int = DEFAULT_SEQUENCE_LENGTH, num_labels: int | None = None,
                 label_names: Sequence[str] | None = None, window_stride: int | None = None,
                 **kwargs: Any):
        kwargs.setdefault("name", "bert_tagger_preprocessor")
        super().__init__(vocabulary, do_lower_case, sequence_length, **kwargs)
        if num_labels is None and label_names is not None:
            num_labels = len(check_label_names(label_names, None))
        self.num_labels = None if num_labels is None else check_integer("num_labels",
                                                                        num_labels)
        self.label_names = check_label_names(label_names, self.num_labels)
        self.window_stride = None if window_stride is None else check_integer(
            "window_stride", window_stride)
        stride_for(self.window_stride, self.sequence_length)  # a stride wider than a window

    def call(self, words, tags=None, sample_weight=None, training: bool = False):
        with tf.device("cpu"):  # string ops have no accelerator kernels
            pieces = self.word_pieces(sentence_words(words))
        packed, labels = word_windows(pieces, self.sequence_length,
                                      stride_for(self.window_stride, self.sequence_length),
                                      self.tokenizer.cls_id, self.tokenizer.sep_id, tags)
        counts = packed.pop(EXAMPLE_WINDOWS)
        if tags is None:
            return packed
        packed.pop(WORD_POSITIONS)
        weights = tf.cast(labels >= 0, tf.float32)
        if sample_weight is not None:
            weights *= tf.repeat(tf.cast(sample_weight, tf.float32), counts)[:, None]
        return packed, tf.maximum(labels, 0), weights

    def example_columns(self, x, y, argument: str) -> tuple:
        words = ragged_words(x)
        if y is None:
            return words, None
        if self.num_labels is None:
            raise ValueError(f"{argument}: {self.name} has no num_labels, so it cannot read "
                             "tags: build it with num_labels=..., as a BertTokenTagger does")
        ids = tag_indices(y, self.num_labels, self.label_names, argument)
        check_aligned(x, y, "{first} sentences but {second} tag lists",
                      "sentence {index} has {first} words but {second} tags")
        return words, words.with_flat_values(tf.constant(ids, tf.int32))


def sentence_lengths(sentences) -> list[int]:
    """The words of each sentence, given as Python lists or as a dataset of batches."""
    if isinstance(sentences, tf.data.Dataset):
        return [int(length) for batch in sentences
                for length in (batch[0] if isinstance(batch, tuple) else batch).row_lengths()]
    return [len(sentence) for sentence in sentences]


def sentence_words(sentences) -> tf.RaggedTensor:
    """[N, (words)] strings from words as given or from whole sentences.

    Ragged words pass as they are; a list of word lists is checked word by
    word (`ragged_words`); [N] whole sentences (a string tensor, array or a
    list of str) are split into the SQuAD reader's words, as the tagging
    SavedModel splits raw text, so that calling the preprocessor on text
    gives what serving gives.
    """
    if isinstance(sentences, tf.RaggedTensor):
        return sentences
    whole = (tf.is_tensor(sentences) or isinstance(sentences, np.ndarray)) and sentences.ndim == 1
    if isinstance(sentences, (list, tuple)) and sentences and all(
            isinstance(sentence, (str, bytes)) for sentence in sentences):
        whole, sentences = True, tf.constant(sentences, tf.string)
    if not whole:
        if tf.is_tensor(sentences) or isinstance(sentences, np.ndarray):
            raise TypeError(f"words: a tagger preprocessor takes [N] sentences or [N, (words)] "
                            f"ragged words, got a {sentences.ndim}-D array")
        return ragged_words(sentences)
    if tf.as_dtype(sentences.dtype) != tf.string:
        raise TypeError(f"words: sentences must be strings, got {tf.as_dtype(sentences.dtype).name}")
    return split_words(tf.convert_to_tensor(sentences, tf.string))[0]

