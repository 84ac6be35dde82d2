"""Question answering (SQuAD): a start and an end logit at every position, and the answers.

The model reads raw questions and contexts through its preprocessor
(`modeling.span_preprocessor`) and turns its logits back into answer texts,
as `run_squad.py` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np

from core.arguments import check_integer
from modeling.fine_tuning_model import OutputProjection, SequenceModel, bilstm_variables
from modeling.losses import HalfCrossEntropy
from modeling.span_preprocessor import BertSpanPreprocessor, SpanWindows, questions_and_contexts
from modeling.text_arguments import optional_count
from network.config import BertConfig
from network.serving_spec import ServingSpec
from text.answer_spans import (MAX_ANSWER_LENGTH, N_BEST_SIZE, BasicWords, Span,
                               candidate_spans, final_text, pieces_text)
from text.sliding_windows import DOC_STRIDE


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

    def serving_spec(self) -> ServingSpec:
        return self._spec("span", ("start_logits", "end_logits"), returns_dict=True,
                          bilstm_units=self.bilstm_units)

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
        best = _best_spans(plan, outputs, n_best_size, max_answer_length)
        found = []  # (row, the span's pieces as text, the words it covers joined by spaces)
        tokens = self.preprocessor.tokenizer.inv_vocab
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


def _best_spans(plan: SpanWindows, outputs: dict[str, np.ndarray], n_best_size: int,
                max_answer_length: int) -> dict[int, tuple[Span, int]]:
    """Each example's best span over its windows, and the window it is in.

    Each window proposes spans starting at the tokens it holds with the most
    context; ties go to the first window.
    """
    best: dict[int, tuple[Span, int]] = {}
    for window, (row, _, length, owned) in enumerate(plan.windows):
        first = plan.offsets[window]  # the context's first position in the window
        starts = set((first + np.flatnonzero(owned)).tolist())
        for span in candidate_spans(outputs["start_logits"][window],
                                    outputs["end_logits"][window], starts,
                                    range(first, first + length), n_best_size,
                                    max_answer_length):
            if row not in best or span.score > best[row][0].score:  # ties: the first
                best[row] = (span, window)
    return best
