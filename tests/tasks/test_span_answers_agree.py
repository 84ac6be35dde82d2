"""The runner, `predict_answers` and the QA SavedModel give the same answers.

One tiny span model with fixed weights answers the same questions on the
same contexts three ways: `run_squad.py`'s path (a SQuAD file read into
windows, `tasks.batch_prediction.predict`, `compute_predictions`), the library's
`BertSpanModel.predict_answers`, and the SavedModel the runner exports,
reloaded from disk. The contexts hold the characters where word splitting
could drift: U+00A0 and
U+3000 belong to the reader's words but are spaces to the BasicTokenizer
(inside a word, and U+3000 alone as a word of no token), tabs and newlines
separate words and become single spaces in a multi-word answer. Each is
read in one window, and again, repeated, in many windows `doc_stride` apart.
"""

import json

import keras
import pytest
import tensorflow as tf

from data_prep.datasets.squad import SquadExample, read_squad_examples
from data_prep.datasets.squad_features import convert_examples_to_features, features_to_arrays
from export.serving_span import export_span_model
from modeling import BertSpanModel, load_tokenizer
from tasks.batch_prediction import predict
from tasks.squad import SquadTask
from tasks.squad_predictions import RawResult, compute_predictions
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder
from text.whitespace_words import whitespace_words

LENGTH = 40
CONTEXTS = {
    "nbsp": "John\u00a0lives in\u00a0Paris,\u00a0the cat\u00a0sat on\u00a0the mat.",
    "ideographic": "the\u3000cat sat \u3000 on the\u3000mat, John\u3000lives in Paris.",
    "tab": "the film\twas\tdull,\tthe\tplot\twas boring\tthe acting\tfine.",
    "newline": "John lives\nin Paris.\n\nThe cat sat\r\non the mat!",
    "mixed": "unbelievable!\tthe film\u00a0was\ngreat,\u3000the acting fine.",
}
QUESTIONS = ["who lives in paris?", "where is the cat?", "what was the film?"]


@pytest.mark.long
class SpanAnswersAgreeTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        keras.utils.set_random_seed(3)
        cls.folder = tiny_folder(root)
        cls.model = BertSpanModel.from_pretrained(cls.folder, sequence_length=LENGTH)
        cls.tokenizer = load_tokenizer(cls.folder)
        cls.rows = [(f"{name}-{index}", question, context) for name, context in CONTEXTS.items()
                    for index, question in enumerate(QUESTIONS)]
        cls.root = root
        cls.served = {}  # SquadTask -> its exported SavedModel's signature, reloaded from disk

    def _runners_answers(self, task: SquadTask, rows: list, windows: int) -> dict[str, str]:
        """The runner's answers; `windows` is the number of windows it must read."""
        squad_file = self.root / "questions.json"
        squad_file.write_text(json.dumps({"data": [{"paragraphs": [
            {"context": context, "qas": [{"id": qas_id, "question": question}]}
            for qas_id, question, context in rows]}]}))
        examples, _ = read_squad_examples(str(squad_file), False, False)
        features = convert_examples_to_features(examples, self.tokenizer, LENGTH,
                                                task.doc_stride, task.max_query_length, False)
        self.assertLen(features, windows)
        arrays = features_to_arrays(features)
        outputs = predict(self.model, arrays, 8)
        results = [RawResult(int(unique_id), start, end) for unique_id, start, end
                   in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
        answers, _, _ = compute_predictions(examples, features, results, task.n_best_size,
                                            task.max_answer_length, True, False)
        return answers

    def _served(self, task: SquadTask):
        """The SavedModel the runner exports for `task`, reloaded; once per task (the tests
        share the default stride's)."""
        if task not in self.served:
            path = export_span_model(self.model, self.tokenizer, LENGTH, task,
                                     str(self.root / f"saved_model{len(self.served)}"))
            self.served[task] = tf.saved_model.load(path).signatures["serving_default"]
        return self.served[task]

    def _three_ways(self, rows: list, task: SquadTask, windows: int) -> list[str]:
        """The runner's answers, checked equal to predict_answers' and the SavedModel's."""
        questions = [question for _, question, _ in rows]
        contexts = [context for _, _, context in rows]
        expected = self._runners_answers(task, rows, windows)
        expected = [expected[qas_id] for qas_id, _, _ in rows]
        library = self.model.predict_answers(questions, contexts, doc_stride=task.doc_stride,
                                             max_query_length=task.max_query_length,
                                             max_answer_length=task.max_answer_length)
        served = self._served(task)(question=tf.constant(questions),
                                    context=tf.constant(contexts))
        exported = [answer.decode() for answer in served["answer"].numpy()]
        for row, (qas_id, _, context) in enumerate(rows):
            self.assertEqual((library[row], exported[row]), (expected[row], expected[row]),
                             msg=f"{qas_id}: {context!r}")
            start, end = int(served["start"][row]), int(served["end"][row])
            # start and end delimit the answer in the context, between its own spaces.
            self.assertEqual(context[start:end].split(), expected[row].split(), msg=qas_id)
        return expected

    def test_the_three_paths_give_the_same_answers(self):
        every_answer = []
        for max_answer_length in (30, 3):
            task = SquadTask(max_query_length=16, max_answer_length=max_answer_length)
            # One window each.
            expected = self._three_ways(self.rows, task, len(self.rows))
            every_answer.extend(zip(self.rows, expected))
        # The contexts' hard cases were reached: whole words kept with the characters the
        # BasicTokenizer drops, and words across tabs and newlines joined by one space.
        answers = [answer for _, answer in every_answer]
        self.assertTrue(any("\u00a0" in answer for answer in answers))
        self.assertTrue(any("\u3000" in answer for answer in answers))
        self.assertTrue(any(" " in answer and answer not in context
                            for (_, _, context), answer in every_answer
                            if "\t" in context or "\n" in context))

    def test_the_three_paths_agree_over_many_windows(self):
        # Each context four times over: 60 to 80 pieces, in windows of at most 22.
        rows = [(qas_id, question, " ".join([context] * 4)) for qas_id, question, context
                in self.rows[::2]]
        answers = []
        for doc_stride in (5, 16, 128):
            task = SquadTask(max_query_length=16, max_answer_length=30, doc_stride=doc_stride)
            features = convert_examples_to_features(
                [SquadExample(qas_id, question, whitespace_words(context)[0])
                 for qas_id, question, context in rows], self.tokenizer, LENGTH, doc_stride, 16,
                False)
            self.assertGreaterEqual(len(features), 2 * len(rows))
            answers.append(self._three_ways(rows, task, len(features)))
        self.assertNotEqual(answers[0], answers[2])  # the stride changes what is read where


if __name__ == "__main__":
    tf.test.main()
