"""The runner, `predict_answers` and the QA SavedModel give the same answers.

One tiny span model with fixed weights answers the same questions on the
same contexts three ways: `run_squad.py`'s path (a SQuAD file read into
windows, `finetuning.predict`, `compute_predictions`), the library's
`BertSpanModel.predict_answers`, and the SavedModel the runner exports,
reloaded from disk. The contexts fit one window (the SavedModel reads one)
and hold the characters where word splitting could drift: U+00A0 and
U+3000 belong to the reader's words but are spaces to the BasicTokenizer
(inside a word, and U+3000 alone as a word of no token), tabs and newlines
separate words and become single spaces in a multi-word answer.
"""

import json

import keras
import tensorflow as tf

from data_prep.datasets.squad import read_squad_examples
from data_prep.datasets.squad_features import convert_examples_to_features, features_to_arrays
from modeling import BertSpanModel, load_tokenizer
from tasks.serving_span import export_span_model
from tasks.squad import SquadTask
from tasks.squad_predictions import RawResult, compute_predictions
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder
from training import finetuning

LENGTH = 40
CONTEXTS = {
    "nbsp": "John\u00a0lives in\u00a0Paris,\u00a0the cat\u00a0sat on\u00a0the mat.",
    "ideographic": "the\u3000cat sat \u3000 on the\u3000mat, John\u3000lives in Paris.",
    "tab": "the film\twas\tdull,\tthe\tplot\twas boring\tthe acting\tfine.",
    "newline": "John lives\nin Paris.\n\nThe cat sat\r\non the mat!",
    "mixed": "unbelievable!\tthe film\u00a0was\ngreat,\u3000the acting fine.",
}
QUESTIONS = ["who lives in paris?", "where is the cat?", "what was the film?"]


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
        cls.squad_file = root / "questions.json"
        cls.squad_file.write_text(json.dumps({"data": [{"paragraphs": [
            {"context": context, "qas": [{"id": qas_id, "question": question}]}
            for qas_id, question, context in cls.rows]}]}))
        cls.root = root

    def _runners_answers(self, task: SquadTask) -> dict[str, str]:
        examples, _ = read_squad_examples(str(self.squad_file), False, False)
        features = convert_examples_to_features(examples, self.tokenizer, LENGTH,
                                                task.doc_stride, task.max_query_length, False)
        self.assertLen(features, len(examples))  # one window each, as the SavedModel reads
        arrays = features_to_arrays(features)
        outputs = finetuning.predict(self.model, arrays, 8)
        results = [RawResult(int(unique_id), start, end) for unique_id, start, end
                   in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
        answers, _, _ = compute_predictions(examples, features, results, task.n_best_size,
                                            task.max_answer_length, True, False)
        return answers

    def test_the_three_paths_give_the_same_answers(self):
        questions = [question for _, question, _ in self.rows]
        contexts = [context for _, _, context in self.rows]
        every_answer = []
        for max_answer_length in (30, 3):
            task = SquadTask(max_query_length=16, max_answer_length=max_answer_length)
            expected = self._runners_answers(task)
            expected = [expected[qas_id] for qas_id, _, _ in self.rows]
            library = self.model.predict_answers(questions, contexts,
                                                 max_answer_length=max_answer_length)
            path = export_span_model(self.model, self.tokenizer, LENGTH, task,
                                     str(self.root / f"saved_model_{max_answer_length}"))
            served = tf.saved_model.load(path).signatures["serving_default"](
                question=tf.constant(questions), context=tf.constant(contexts))
            exported = [answer.decode() for answer in served["answer"].numpy()]
            for row, (qas_id, _, context) in enumerate(self.rows):
                self.assertEqual((library[row], exported[row]), (expected[row], expected[row]),
                                 msg=f"{qas_id}: {context!r}")
                start, end = int(served["start"][row]), int(served["end"][row])
                # start and end delimit the answer in the context, between its own spaces.
                self.assertEqual(context[start:end].split(), expected[row].split(), msg=qas_id)
            every_answer.extend(zip(self.rows, expected))
        # The contexts' hard cases were reached: whole words kept with the characters the
        # BasicTokenizer drops, and words across tabs and newlines joined by one space.
        answers = [answer for _, answer in every_answer]
        self.assertTrue(any("\u00a0" in answer for answer in answers))
        self.assertTrue(any("\u3000" in answer for answer in answers))
        self.assertTrue(any(" " in answer and answer not in context
                            for (_, _, context), answer in every_answer
                            if "\t" in context or "\n" in context))


if __name__ == "__main__":
    tf.test.main()
