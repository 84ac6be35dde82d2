"""Fine-tuning models: the paper's task heads on top of the encoder (Figure 4).

Each model takes the packed inputs and returns float32 logits
(`modeling.fine_tuning_model` holds what they share); each reads raw text
through its task's preprocessor (`modeling.classifier_preprocessor`,
`modeling.tagger_preprocessor`, `modeling.span_preprocessor`) and turns its
logits back into the task's answers: labels, tags, answer texts.

The left-to-right (GPT-style) variant of the classifier cannot read the
[CLS] vector: under causal attention the first position sees only itself.
It classifies from the last real token instead, as GPT does with its final
"extract" token, and can add the language-model loss on the same inputs
(GPT's L3 = L2 + lambda * L1). GPT's other input transformations follow from
the same reading: a left-to-right model sees a pair in one order only, so for
similarity, which has no order, GPT encodes both orders and adds the two
last-token vectors (`both_orders`); multiple choice is one
[context; delimiter; answer] sequence per choice, each scored from its last
token.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops
from scipy import special

from core.arguments import check_flag, check_integer, check_number
from modeling.classifier_preprocessor import BertClassifierPreprocessor
from modeling.config import BertConfig
from modeling.fine_tuning_model import (FineTuningModel, OutputProjection, SequenceModel,
                                        bilstm_layer, bilstm_variables, flatten_choices,
                                        last_real_token)
from modeling.heads import LeftToRightLMHead
from modeling.labels import check_label_names, label_outputs
from modeling.multi_label import MultiLabelF1, check_threshold, label_sets
from modeling.pretrainer import cross_entropy, left_to_right_lm_loss
from modeling.span_preprocessor import BertSpanPreprocessor, questions_and_contexts
from modeling.tagger_preprocessor import BertTaggerPreprocessor, sentence_lengths
from modeling.text_arguments import is_raw_text, optional_count
from modeling.text_windows import (EXAMPLE_WINDOWS, TRUNCATE, WORD_POSITIONS,
                                   check_window_settings, mean_over_windows, word_logits)
from text.answer_spans import (MAX_ANSWER_LENGTH, N_BEST_SIZE, BasicWords, Span,
                               candidate_spans, final_text, pieces_text)
from text.sliding_windows import DOC_STRIDE


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(FineTuningModel):
    """Sentence (pair) classification: K logits, or one score for regression (STS-B).

    `bilstm_units > 0` reads the sequence with a randomly initialized
    bidirectional LSTM and classifies from its two final states, Table 5's
    "+ BiLSTM" row: it gives the left-to-right model a right-to-left reading.

    Raw texts longer than the preprocessor's `sequence_length` are cut to it
    with `long_texts="truncate"` (counted and logged once per call), or read
    whole with `long_texts="windows"`: windows `window_stride` sub-tokens
    apart (default: half a window), each trained on as an example with its
    text's label, a text predicted and evaluated by the mean of its windows'
    logits (`modeling.text_windows`). Its preprocessor is a
    `BertClassifierPreprocessor` with the model's labels and windows.

    Args:
      config: the encoder's hyperparameters.
      num_labels: classes; 1 for regression (one score, mean squared error).
      causal: the left-to-right model, classifying from the last real token.
      lm_aux_weight: with `causal`, GPT's auxiliary language-model loss weight.
      both_orders: with `causal`, encode a pair in both orders and add them
        (GPT's similarity input); inputs are then [batch, 2, seq].
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per class, in order: labels in and out by name.
      multi_label: each label a yes/no of its own (a sigmoid each, binary
        cross-entropy); labels are label sets.
      threshold: with `multi_label`, the probability above which a label is
        predicted, in (0, 1).
      long_texts: "truncate" (cut to `sequence_length`) or "windows" (read whole).
      window_stride: with "windows", sub-tokens between window starts
        (default: half a window).
      preprocessor: a `BertPreprocessor` (or `BertClassifierPreprocessor`) so
        that `fit` and `predict` take text; None for packed inputs only.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertClassifier.from_pretrained("uncased_L-12_H-768_A-12", num_labels=2,
    ...                                        label_names=["negative", "positive"])
    >>> model.compile()
    >>> model.fit(["a fine film", "a dull film"], ["positive", "negative"], epochs=2)
    >>> model.predict_labels(["a fine plot"])
    ['positive']
    """

    preprocessor_class = BertClassifierPreprocessor

    def __init__(self, config: BertConfig, num_labels: int, causal: bool = False,
                 lm_aux_weight: float = 0.0, both_orders: bool = False, bilstm_units: int = 0,
                 label_names: Sequence[str] | None = None, multi_label: bool = False,
                 threshold: float = 0.5, long_texts: str = TRUNCATE,
                 window_stride: int | None = None, preprocessor=None, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        num_labels = check_integer("num_labels", num_labels)
        lm_aux_weight = check_number("lm_aux_weight", lm_aux_weight, 0.0)
        multi_label = check_flag("multi_label", multi_label)
        threshold = check_threshold(threshold)
        if multi_label and num_labels < 2:
            raise ValueError(f"multi_label=True needs num_labels >= 2, got {num_labels}: one "
                             "yes/no label is a two-class single-label model")
        if threshold != 0.5 and not multi_label:
            raise ValueError(f"threshold={threshold} applies to multi_label=True; a "
                             "single-label model predicts its most probable class")
        window_stride = check_window_settings(long_texts, window_stride)
        if both_orders and long_texts != TRUNCATE:
            raise ValueError(f"long_texts={long_texts!r} reads single texts; a both_orders "
                             "model takes packed pairs")
        label_names = check_label_names(label_names, num_labels)
        preprocessor = BertClassifierPreprocessor.for_task(
            preprocessor, num_labels=num_labels, label_names=label_names,
            multi_label=multi_label, long_texts=long_texts, window_stride=window_stride)
        super().__init__(config, causal=causal, preprocessor=preprocessor, **kwargs)
        if lm_aux_weight and not causal:
            raise ValueError("lm_aux_weight needs the left-to-right model (causal=True)")
        if both_orders and not causal:
            raise ValueError("both_orders is GPT's similarity input for the left-to-right "
                             "model (causal=True); a bidirectional model sees both texts")
        self.keep_settings(num_labels=num_labels, lm_aux_weight=lm_aux_weight,
                           both_orders=both_orders, bilstm_units=bilstm_units,
                           label_names=label_names, multi_label=multi_label, threshold=threshold,
                           long_texts=long_texts, window_stride=window_stride)
        self.bilstm = bilstm_layer(bilstm_units, config.hidden_size, False, self.dtype_policy)
        self.summary_size = 2 * bilstm_units if bilstm_units else config.hidden_size
        self.classifier = OutputProjection(num_labels, self.summary_size,
                                           config.initializer_range, "", name="classifier",
                                           dtype=self.dtype_policy)
        self.lm_head = (LeftToRightLMHead(config, self.encoder.embedding_table,
                                          dtype=self.dtype_policy)
                        if self.lm_aux_weight else None)
        if causal or bilstm_units:
            self.encoder.pooler.trainable = False  # the summary is not [CLS]'s pooled vector
        self._finish_build((None, 2, None) if both_orders else (None, None))

    def call(self, features, training=None):
        if self.both_orders:  # [batch, 2, seq]: (a, b) and (b, a), one sequence each
            features, orders = flatten_choices(features)
        encoded = self.encode(features, training,
                              pooled_only=self.bilstm is None and not self.causal)
        if self.bilstm is not None:
            summary = self.bilstm(encoded["sequence_output"],
                                  mask=ops.cast(features["input_mask"], "bool"), training=training)
        elif self.causal:
            summary = last_real_token(encoded["sequence_output"], features["input_mask"])
        else:
            summary = encoded["pooled_output"]
        if self.both_orders:
            summary = ops.sum(ops.reshape(summary, (-1, orders, self.summary_size)), 1)
        logits = self.classifier(self.dropout(summary, training=training))
        if self.lm_head is not None and training:
            lm_logits = self.lm_head(encoded["sequence_output"])
            self.add_loss(self.lm_aux_weight * left_to_right_lm_loss(
                lm_logits, features["input_ids"], features["input_mask"]))
        logits = logits[:, 0] if self.num_labels == 1 else logits
        if EXAMPLE_WINDOWS in features:  # a batch of texts read through windows
            return mean_over_windows(logits, features[EXAMPLE_WINDOWS])
        return logits

    def head_variables(self) -> dict:
        names = {**self.classifier.checkpoint_variables(), **bilstm_variables(self.bilstm)}
        if self.lm_head is not None:
            names.update(self.lm_head.checkpoint_variables())
        return names

    def _require_preprocessor(self) -> None:
        if self.both_orders:
            raise ValueError("a both_orders model takes packed [batch, 2, seq] inputs")
        super()._require_preprocessor()

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0,) if self.num_labels == 1 else (0, self.num_labels), np.float32)

    def default_loss(self) -> keras.losses.Loss:
        if self.num_labels == 1:
            return keras.losses.MeanSquaredError()
        if self.multi_label:  # each label a yes/no of its own
            return keras.losses.BinaryCrossentropy(from_logits=True)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        if self.num_labels == 1:
            return []
        if self.multi_label:
            return [MultiLabelF1(self.label_names or list(range(self.num_labels)),
                                 self.threshold)]
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def predict_labels(self, x, batch_size: int | None = None, return_scores: bool = False):
        """The predicted label of each text, by name if the model has `label_names`.

        Args:
          x: texts, or pairs, as `predict` takes them.
          batch_size: texts per batch (32 when None).
          return_scores: also return the probabilities, [N, num_labels] in label
            order: the softmax of the logits, or for a `multi_label` model each
            label's sigmoid.

        Returns:
          One label per text (its index without `label_names`); for a
          `multi_label` model, the list of labels whose probability exceeds
          `threshold`; for regression (one label), the score itself. With
          `return_scores`, a pair (labels, probabilities). [] for no texts.

        Examples:

        >>> labels, scores = model.predict_labels(["a fine film"], return_scores=True)
        >>> labels, scores.shape
        (['positive'], (1, 2))
        """
        return_scores = check_flag("return_scores", return_scores)
        if return_scores and self.num_labels == 1:
            raise ValueError("return_scores=True needs classes: a regression model "
                             "(num_labels=1) predicts the score itself, which predict_labels "
                             "already returns")
        logits = self.predict(x, batch_size=batch_size, verbose=0)
        if self.num_labels == 1:
            return logits.tolist()
        if self.multi_label:
            probabilities = special.expit(logits)
            labels = label_sets(probabilities, self.threshold, self.label_names)
        else:
            probabilities = special.softmax(logits, axis=-1)
            labels = label_outputs(np.argmax(logits, axis=-1).tolist(), self.label_names)
        return (labels, probabilities) if return_scores else labels


@keras.saving.register_keras_serializable(package="bert")
class BertMultipleChoice(FineTuningModel):
    """SWAG: each (context, ending) pair encoded, one score per choice from [CLS]
    (from the last token under `causal`, GPT's multiple-choice input).

    It takes packed inputs [batch, choices, seq] (`tasks.classification`
    builds them from SWAG) and returns [batch, choices] scores.

    Args:
      config: the encoder's hyperparameters.
      causal: the left-to-right model, scoring each choice at its last token.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertMultipleChoice.from_pretrained("uncased_L-12_H-768_A-12")
    >>> ids = np.ones((1, 4, 16), np.int32)
    >>> model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}).shape
    TensorShape([1, 4])
    """

    def __init__(self, config: BertConfig, causal: bool = False, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(config, causal=causal, **kwargs)
        self.scorer = OutputProjection(1, config.hidden_size, config.initializer_range,
                                       "multiple_choice", name="scorer",
                                       dtype=self.dtype_policy)
        if causal:
            self.encoder.pooler.trainable = False  # each choice is read at its last token
        self._finish_build((None, 4, None))  # SWAG's four choices; any count works when called

    def call(self, features, training=None):
        flat, choices = flatten_choices(features)
        encoded = self.encode(flat, training, pooled_only=not self.causal)
        summary = (last_real_token(encoded["sequence_output"], flat["input_mask"])
                   if self.causal else encoded["pooled_output"])
        scores = self.scorer(self.dropout(summary, training=training))
        return ops.reshape(scores, (-1, choices))

    def head_variables(self) -> dict:
        return self.scorer.checkpoint_variables()

    def default_loss(self) -> keras.losses.Loss:
        # One score per choice; the label is the right choice's index.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0, input_shape[1] if len(input_shape) == 3 else 0), np.float32)


@keras.saving.register_keras_serializable(package="bert")
class BertSpanModel(SequenceModel):
    """SQuAD: start and end logits per position (the paper's vectors S and E).

    From raw text (its preprocessor is a `BertSpanPreprocessor`):
    `predict((questions, contexts))` gives the logits of one window per
    example (what does not fit is counted and logged); `predict_answers` the
    answers' texts over every window, as `run_squad.py` finds them; and
    `fit((questions, contexts), answers)` trains as the runner trains, on
    every window of each context, with the runner's loss (the mean of the
    start and end cross-entropies). SQuAD 2.0's null answer stays in
    `run_squad.py`.

    Args:
      config: the encoder's hyperparameters.
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      preprocessor: a `BertPreprocessor` (or `BertSpanPreprocessor`) so that
        the model takes text; None for packed inputs only.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertSpanModel.from_pretrained("squad_output_dir")
    >>> model.predict_answers(["Where does John live?"], ["John lives in Paris."])
    ['Paris.']
    """

    preprocessor_class = BertSpanPreprocessor

    def __init__(self, config: BertConfig, bilstm_units: int = 0, preprocessor=None,
                 **kwargs):
        kwargs.setdefault("name", "bert_span")
        super().__init__(config, bilstm_units,
                         preprocessor=BertSpanPreprocessor.for_task(preprocessor), **kwargs)
        self.span = OutputProjection(2, self.sequence_width, config.initializer_range,
                                     "cls/squad", name="span", dtype=self.dtype_policy)
        self._finish_build((None, None))

    def call(self, features, training=None):
        logits = self.span(self.read_sequence(features, training))
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def head_variables(self) -> dict:
        return {**self.span.checkpoint_variables(), **bilstm_variables(self.bilstm)}

    def _empty_outputs(self, input_shape: tuple) -> dict[str, np.ndarray]:
        empty = np.zeros((0, input_shape[-1]), np.float32)
        return {"start_logits": empty, "end_logits": empty.copy()}

    def default_loss(self) -> dict[str, keras.losses.Loss]:
        # Half of each cross-entropy: Keras adds the outputs' losses, giving their mean.
        return {"start_logits": HalfCrossEntropy(name="start_loss"),
                "end_logits": HalfCrossEntropy(name="end_loss")}

    def predict_answers(self, questions: Sequence[str], contexts: Sequence[str],
                        doc_stride: int = DOC_STRIDE, max_query_length: int | None = None,
                        max_answer_length: int = MAX_ANSWER_LENGTH,
                        batch_size: int | None = None,
                        n_best_size: int = N_BEST_SIZE) -> list[str]:
        """The best span of each context over its windows, as the SQuAD runner finds it.

        A context longer than the room beside its question is read in windows
        `doc_stride` pieces apart, as `run_squad.py` reads it; each window
        proposes spans starting at the tokens it holds with the most context
        (the best of the `n_best_size` best starts and ends paired, at most
        `max_answer_length` pieces), and the best score over all windows
        wins. Its text is the original's `get_final_text`: the span's words
        joined by single spaces, cut to the pieces where the alignment
        allows. [] for no questions.

        Args:
          questions, contexts: one question per context.
          doc_stride: context pieces between the starts of two windows.
          max_query_length: question pieces kept; None: the runner's 64, or
            fewer where `sequence_length` leaves the context less than one
            position (`sequence_length - 4`).
          max_answer_length: the longest answer, in sub-tokens.
          batch_size: windows per prediction batch (Keras' default when None).
          n_best_size: the best starts and the best ends of a window that are paired.

        Examples:

        >>> model.predict_answers(["Who sleeps?"], ["John sleeps all day."])
        ['John']
        """
        doc_stride = check_integer("doc_stride", doc_stride)
        max_answer_length = check_integer("max_answer_length", max_answer_length)
        n_best_size = check_integer("n_best_size", n_best_size)
        batch_size = optional_count("batch_size", batch_size)
        self._require_preprocessor()
        max_query_length = self.preprocessor.query_limit(max_query_length)
        questions, contexts = questions_and_contexts((questions, contexts))
        if not questions:
            return []
        plan = self.preprocessor.windows(questions, contexts, max_query_length, doc_stride)
        outputs = self.predict(plan.packed, batch_size=batch_size, verbose=0)
        tokens = self.preprocessor.tokenizer.inv_vocab
        best: dict[int, tuple[Span, int]] = {}  # example -> its best span and window
        for window, (row, start, length, owned) in enumerate(plan.windows):
            first = plan.offsets[window]  # the context's first position in the window
            starts = set((first + np.flatnonzero(owned)).tolist())
            for span in candidate_spans(outputs["start_logits"][window],
                                        outputs["end_logits"][window], starts,
                                        range(first, first + length), n_best_size,
                                        max_answer_length):
                if row not in best or span.score > best[row][0].score:  # ties: the first
                    best[row] = (span, window)
        found = []  # (row, the span's pieces as text, the words it covers joined by spaces)
        for row, (span, window) in best.items():
            _, start, _, _ = plan.windows[window]
            pieces = range(start + span.start - plan.offsets[window],
                           start + span.end - plan.offsets[window] + 1)
            words = plan.piece_words[row]
            covered = plan.words[row][words[pieces[0]]:words[pieces[-1]] + 1]
            found.append((row, pieces_text([tokens[plan.piece_ids[row][i]] for i in pieces]),
                          " ".join(covered)))
        basic_words = BasicWords(self.preprocessor.tokenizer.do_lower_case)
        basic_words.prefetch(covered for _, _, covered in found)
        answers = [""] * len(contexts)
        for row, pred_text, covered in found:
            answers[row] = final_text(pred_text, covered, basic_words.get(covered))
        return answers


@keras.saving.register_keras_serializable(package="bert")
class BertTokenTagger(SequenceModel):
    """Token tagging (NER): K logits at every position, no CRF, as the paper.

    Raw sentences (lists of words, read by a `BertTaggerPreprocessor`) longer
    than the preprocessor's window are read through windows `window_stride`
    sub-tokens apart (default: half a window), every word scored in the
    window where it has the most context.

    Args:
      config: the encoder's hyperparameters.
      num_labels: tags.
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per tag, in order: tags in and out by name.
      window_stride: sub-tokens between the starts of a long sentence's
        windows (default: half a window).
      preprocessor: a `BertPreprocessor` (or `BertTaggerPreprocessor`) so that
        the model takes sentences; None for packed inputs only.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertTokenTagger.from_pretrained("cased_L-12_H-768_A-12", num_labels=3,
    ...                                         label_names=["O", "B-PER", "B-LOC"])
    >>> model.compile()
    >>> model.fit([["John", "lives", "in", "Paris"]], [["B-PER", "O", "O", "B-LOC"]])
    >>> model.predict_labels([["Mary", "lives", "in", "Rome"]])
    [['B-PER', 'O', 'O', 'B-LOC']]
    """

    preprocessor_class = BertTaggerPreprocessor

    def __init__(self, config: BertConfig, num_labels: int, bilstm_units: int = 0,
                 label_names: Sequence[str] | None = None, window_stride: int | None = None,
                 preprocessor=None, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        num_labels = check_integer("num_labels", num_labels)
        if window_stride is not None:
            window_stride = check_integer("window_stride", window_stride)
        label_names = check_label_names(label_names, num_labels)
        preprocessor = BertTaggerPreprocessor.for_task(
            preprocessor, num_labels=num_labels, label_names=label_names,
            window_stride=window_stride)
        super().__init__(config, bilstm_units, preprocessor=preprocessor, **kwargs)
        self.keep_settings(num_labels=num_labels, label_names=label_names,
                           window_stride=window_stride)
        self.tagger = OutputProjection(num_labels, self.sequence_width, config.initializer_range,
                                       "ner", name="tagger", dtype=self.dtype_policy)
        self._finish_build((None, None))

    def call(self, features, training=None):
        sequence = self.read_sequence(features, training)
        logits = self.tagger(self.dropout(sequence, training=training))
        if WORD_POSITIONS in features:  # raw sentences: each word's logits, from its window
            return word_logits(logits, features[WORD_POSITIONS])
        return logits

    def head_variables(self) -> dict:
        return {**self.tagger.checkpoint_variables(), **bilstm_variables(self.bilstm)}

    def predict(self, x, batch_size=None, **kwargs):
        """Raw sentences give each word's logits [N, most words, labels], zeros past a
        sentence's end; packed inputs give logits at every position, as Keras."""
        outputs = super().predict(x, batch_size=batch_size, **kwargs)
        if not is_raw_text(x) or outputs.ndim != 2:  # not [words, labels]: no sentences
            return outputs
        lengths = sentence_lengths(x)
        padded = np.zeros((len(lengths), max(lengths), self.num_labels), np.float32)
        padded[np.arange(max(lengths)) < np.array(lengths)[:, None]] = outputs
        return padded

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0, input_shape[-1], self.num_labels), np.float32)

    def default_loss(self) -> keras.losses.Loss:
        # The mean over labelled sub-tokens, as `tagging_loss`: weights are 0 elsewhere.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")

    def default_weighted_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def predict_labels(self, x, batch_size: int | None = None, return_scores: bool = False):
        """Each sentence's tags, one per word, lined up with the input words, however
        long the sentence is (each word read in its max-context window).

        Args:
          x: sentences, each a list of words.
          batch_size: sentences per batch (32 when None).
          return_scores: also return each word's tag probabilities (the softmax
            at its first sub-token, [num_labels] in label order).

        Returns:
          Per sentence, a tag per word (its name if the model has
          `label_names`, else its index); with `return_scores`, a pair (tags,
          probabilities), the probabilities per sentence and word. [] for no
          sentences.

        Examples:

        >>> model.predict_labels([["John", "lives", "in", "Paris"]])
        [['B-PER', 'O', 'O', 'B-LOC']]
        """
        return_scores = check_flag("return_scores", return_scores)
        logits = self.predict(x, batch_size=batch_size, verbose=0)
        if not len(logits):
            return ([], []) if return_scores else []
        best = np.argmax(logits, axis=-1)
        lengths = sentence_lengths(x)
        tags = [label_outputs(best[row, :length].tolist(), self.label_names)
                for row, length in enumerate(lengths)]
        if not return_scores:
            return tags
        probabilities = special.softmax(logits, axis=-1)
        return tags, [list(probabilities[row, :length]) for row, length in enumerate(lengths)]


@keras.saving.register_keras_serializable(package="bert")
class HalfCrossEntropy(keras.losses.Loss):
    """Half the sparse cross-entropy of logits: the start and end outputs' halves add up
    to the original run_squad.py's span loss, their mean (`span_loss`)."""

    def call(self, y_true, y_pred):
        return 0.5 * keras.losses.sparse_categorical_crossentropy(y_true, y_pred,
                                                                  from_logits=True)


def classification_loss(features: dict, logits) -> dict:
    """Mean cross-entropy against `label_ids` (also multiple choice: one label per row)."""
    return {"loss": ops.mean(cross_entropy(features["label_ids"], logits))}


def regression_loss(features: dict, scores) -> dict:
    """Mean squared error against float `label_ids` (STS-B)."""
    return {"loss": ops.mean(ops.square(scores - ops.cast(features["label_ids"], "float32")))}


def span_loss(features: dict, outputs: dict) -> dict:
    """Mean of the start and end cross-entropies, as the original run_squad.py."""
    start = ops.mean(cross_entropy(features["start_positions"], outputs["start_logits"]))
    end = ops.mean(cross_entropy(features["end_positions"], outputs["end_logits"]))
    return {"loss": (start + end) / 2.0, "start_loss": start, "end_loss": end}


def tagging_loss(features: dict, logits) -> dict:
    """Mean cross-entropy over labelled positions; `label_ids` < 0 (sub-tokens, padding,
    context) carry no loss, the paper's "X" positions."""
    labels = features["label_ids"]
    weights = ops.cast(labels >= 0, "float32")
    per_token = cross_entropy(ops.maximum(labels, 0), logits)
    return {"loss": ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)}
