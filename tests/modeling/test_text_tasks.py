"""Task models on raw text: compile defaults, fit/predict on strings, label names, reload."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertClassifier, BertSpanModel, BertTokenTagger, load_preprocessor
from tests.fixtures import REPO, TestCase
from tests.modeling.tiny_folder import tiny_folder
from text.sentence_pairs import pack_ids
from training.configs import OptimizationConfig
from training.optimization import BertAdamW, WarmupLinearDecay

TEXTS = ["a fine film", "a dull film", "great acting", "boring plot", "the film is great",
         "the plot was dull", "fine acting", "a boring film"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat", "sat"], ["unbelievable", "!"]]
TAGS = [["B-PER", "O", "O", "B-LOC"], ["O", "B-PER", "O"], ["O", "O"]]
TAG_NAMES = ["O", "B-PER", "B-LOC"]


class TextClassifierTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(0)

    def _classifier(self, **kwargs):
        kwargs.setdefault("num_labels", 2)
        return BertClassifier.from_pretrained(self.folder, sequence_length=16, **kwargs)

    @pytest.mark.slow
    def test_fit_on_strings_lowers_the_loss_on_the_runners_schedule_and_predicts_labels(self):
        # One fit, checked twice: it learns, and it follows the runners' schedule. 8 examples
        # in batches of 2 for 5 epochs, a quarter warming up: the runners' OptimizationConfig
        # and fit count 20 updates, 5 of warm-up, by the one plan.
        runner = OptimizationConfig(learning_rate=1e-3, num_train_epochs=5.0,
                                    warmup_proportion=0.25)
        updates, warmup = runner.schedule(len(TEXTS), 2)
        self.assertEqual((updates, warmup), (20, 5))
        schedule = WarmupLinearDecay(runner.learning_rate, updates, warmup)  # as the runners

        class RatePerStep(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                rates.append(float(self.model.optimizer.learning_rate))

        rates = []
        model = self._classifier(label_names=["neg", "pos"])
        # A tiny random model learns slowly at 5e-5; six steps at 1e-3 move its loss by
        # about 1e-4, either way.
        model.compile(learning_rate=1e-3, warmup_proportion=0.25)
        before = model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["loss"]
        history = model.fit(TEXTS, LABELS, batch_size=2, epochs=5, verbose=0,
                            validation_data=(TEXTS[:4], LABELS[:4]), callbacks=[RatePerStep()])
        with self.subTest("the runners' schedule"):
            self.assertEqual(int(model.optimizer.iterations), updates)
            self.assertEqual(rates, [float(schedule(step)) for step in range(updates)])
            self.assertGreater(rates[warmup], rates[0])  # it warms up, then decays
            self.assertGreater(rates[warmup], rates[-1])
        self.assertLen(history.history["val_loss"], 5)
        after = model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)
        self.assertLess(after["loss"], before)
        self.assertIn("accuracy", after)
        self.assertEqual(model.predict(TEXTS[:3], verbose=0).shape, (3, 2))
        predicted = model.predict_labels(TEXTS)
        self.assertContainsSubset(set(predicted), {"neg", "pos"})
        self.assertLen(predicted, len(TEXTS))
        # Labels may be given by name too.
        by_name = model.evaluate(TEXTS, [["neg", "pos"][y] for y in LABELS], verbose=0,
                                 return_dict=True)
        self.assertAllClose(by_name, after)

    @pytest.mark.slow
    def test_compile_defaults_are_the_papers_recipe_sized_at_fit(self):
        model = self._classifier()
        model.compile()
        self.assertIsInstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
        # 10 examples in batches of 4: 3 steps per epoch, 9 in 3 epochs, int(10%) warm up.
        model.fit(TEXTS + TEXTS[:2], LABELS + LABELS[:2], batch_size=4, epochs=3, verbose=0)
        optimizer = model.optimizer
        self.assertIsInstance(optimizer, BertAdamW)
        self.assertEqual((optimizer.weight_decay_rate, optimizer.epsilon,
                          optimizer.global_clipnorm), (0.01, 1e-6, 1.0))
        schedule = keras.saving.deserialize_keras_object(optimizer.get_config()["learning_rate"])
        self.assertIsInstance(schedule, WarmupLinearDecay)
        self.assertEqual((schedule.init_lr, schedule.num_train_steps, schedule.num_warmup_steps,
                          schedule.end_lr), (5e-5, 9, 0, 0.0))
        self.assertEqual(int(optimizer.iterations), 9)
        regression = self._classifier(num_labels=1)
        regression.compile()
        self.assertIsInstance(regression.loss, keras.losses.MeanSquaredError)
        self.assertEqual(regression.predict(TEXTS, verbose=0).shape, (8,))

    @pytest.mark.long
    @pytest.mark.slow
    def test_pairs_and_packed_inputs_both_train(self):
        model = self._classifier()
        model.compile(warmup_proportion=0.5)
        pairs = list(zip(TEXTS, reversed(TEXTS)))
        model.fit(pairs, LABELS, batch_size=4, verbose=0)
        packed = load_preprocessor(self.folder, sequence_length=16)(pairs)
        packed = {key: value.numpy() for key, value in packed.items()}
        self.assertAllClose(model.predict(packed, verbose=0), model.predict(pairs, verbose=0))
        model.fit(packed, np.array(LABELS), batch_size=2, epochs=2, verbose=0)
        schedule = keras.saving.deserialize_keras_object(
            model.optimizer.get_config()["learning_rate"])
        self.assertEqual((schedule.num_train_steps, schedule.num_warmup_steps), (8, 4))
        # validation_split keeps floor(8 x 0.5) = 4 examples to train on: 2 steps of 2 per
        # epoch, and the schedule ends with them.
        model.fit(packed, np.array(LABELS), batch_size=2, epochs=2, validation_split=0.5,
                  verbose=0)
        schedule = keras.saving.deserialize_keras_object(
            model.optimizer.get_config()["learning_rate"])
        self.assertEqual(schedule.num_train_steps, 4)
        self.assertEqual(int(model.optimizer.iterations), 4)

    @pytest.mark.long
    @pytest.mark.slow
    def test_validation_split_holds_out_the_last_texts_and_the_schedule_counts_the_rest(self):
        names = ["neg", "pos"]
        model = self._classifier(label_names=names)
        model.compile()
        pairs = list(zip(TEXTS, reversed(TEXTS)))
        by_name = [names[y] for y in LABELS]
        # Keras' rule: floor(8 x (1 - 0.3)) = 5 train (3 steps of 2), the last 3 validate.
        history = model.fit(pairs, by_name, batch_size=2, epochs=2, validation_split=0.3,
                            verbose=0)
        schedule = keras.saving.deserialize_keras_object(
            model.optimizer.get_config()["learning_rate"])
        self.assertEqual((schedule.num_train_steps, int(model.optimizer.iterations)), (6, 6))
        held_out = model.evaluate(pairs[5:], by_name[5:], batch_size=2, verbose=0,
                                  return_dict=True)
        self.assertAllClose(history.history["val_loss"][-1], held_out["loss"])
        self.assertAllClose(history.history["val_accuracy"][-1], held_out["accuracy"])
        with self.assertRaisesRegex(ValueError, r"^validation_split=0.9 of 8 examples leaves "
                                    "none to train on"):
            model.fit(TEXTS, LABELS, validation_split=0.9, verbose=0)
        with self.assertRaisesRegex(ValueError, r"^validation_split must be"):
            model.fit(TEXTS, LABELS, validation_split=1.0, verbose=0)
        with self.assertRaisesRegex(ValueError, "^validation_split and validation_data both"):
            model.fit(TEXTS, LABELS, validation_split=0.5, verbose=0,
                      validation_data=(TEXTS, LABELS))

    def test_a_reloaded_model_keeps_the_plan_not_a_placeholder_schedule(self):
        model = self._classifier()
        model.compile(learning_rate=2e-5, warmup_proportion=0.2)
        path = self.root / "planned.keras"
        model.save(path)
        config = keras.saving.load_model(path).get_compile_config()
        self.assertEqual((config["optimizer"], config["learning_rate"],
                          config["warmup_proportion"]), ("auto", 2e-5, 0.2))
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        self.assertEqual(model.get_compile_config()["optimizer"]["class_name"], "SGD")

    def test_models_are_built_when_returned(self):
        model = self._classifier()
        self.assertGreater(model.count_params(), 0)
        copy = BertClassifier.from_config(model.get_config())
        self.assertEqual(copy.count_params(), model.count_params())
        self.assertEqual(copy.preprocessor.vocabulary, model.preprocessor.vocabulary)
        lines = []
        copy.summary(print_fn=lambda line, **_: lines.append(line))
        self.assertIn("(None, 2)", "\n".join(lines))

    def test_text_needs_a_preprocessor_and_label_names_must_fit(self):
        packed_only = BertClassifier.from_pretrained(self.folder, num_labels=2,
                                                     preprocessor=None)
        self.assertIsNone(packed_only.preprocessor)
        with self.assertRaisesRegex(ValueError, r"no preprocessor.*sequence_length=N"):
            packed_only.predict(TEXTS)
        with self.assertRaisesRegex(ValueError, "a list of texts .* not a single one"):
            self._classifier().predict("a fine film")
        with self.assertRaisesRegex(ValueError, "3 label_names for 2 labels"):
            self._classifier(label_names=["a", "b", "c"])
        model = self._classifier(label_names=["neg", "pos"])
        with self.assertRaisesRegex(ValueError, "example 1 has label 'meh', which is not among "
                                                "the model's label_names"):
            model.compile()
            model.fit(TEXTS[:2], ["pos", "meh"], verbose=0)
        with self.assertRaisesRegex(ValueError, "x holds 8 examples but y 2 labels"):
            model.fit(TEXTS, LABELS[:2], verbose=0)
        unknown_size = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4).filter(
            lambda texts, labels: True)
        with self.assertRaisesRegex(ValueError, "unknown size: pass steps_per_epoch"):
            model.fit(unknown_size, verbose=0)

    def test_mixed_bfloat16_predicts_on_strings(self):
        model = self._classifier(dtype="mixed_bfloat16")
        scores = model.predict(TEXTS, verbose=0)
        self.assertEqual(scores.dtype, np.float32)
        self.assertAllEqual(np.isfinite(scores), np.ones_like(scores, bool))

    @pytest.mark.long
    @pytest.mark.slow
    def test_keras_file_predicts_the_same_in_a_fresh_process(self):
        model = self._classifier(label_names=["neg", "pos"])
        model.compile()
        path = self.root / "classifier.keras"
        model.save(path)
        script = ("import json, sys, keras, modeling\n"
                  "model = keras.saving.load_model(sys.argv[1])\n"
                  "print(json.dumps({'scores': model.predict(json.loads(sys.argv[2]), verbose=0)"
                  ".tolist(), 'labels': model.predict_labels(json.loads(sys.argv[2]))}))\n")
        environment = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
        result = subprocess.run([sys.executable, "-c", script, str(path), json.dumps(TEXTS)],
                                capture_output=True, text=True, env=environment, check=True)
        reloaded = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertAllClose(reloaded["scores"], model.predict(TEXTS, verbose=0))
        self.assertEqual(reloaded["labels"], model.predict_labels(TEXTS))


class TextTaggerTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)

    def test_first_sub_token_of_each_word_carries_its_label(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=8)
        words = tf.ragged.constant([["unbelievable", "film"], ["a", "cat", "sat", "on", "the",
                                                               "mat", "."]])
        labels = tf.ragged.constant([[1, 2], [0, 1, 0, 0, 0, 2, 0]])
        packed, starts, token_labels = preprocessor.pack_words(words, labels)
        # The words' pieces packed as one text give the same ids.
        joined = preprocessor([" ".join(row) for row in [["unbelievable", "film"],
                                                         ["a", "cat", "sat", "on", "the", "mat",
                                                          "."]]])
        self.assertAllEqual(packed["input_ids"], joined["input_ids"])
        # "unbelievable" is un ##believ ##able; six positions hold the second sentence's words.
        self.assertEqual(starts.to_list(), [[1, 4], [1, 2, 3, 4, 5, 6, -1]])
        self.assertAllEqual(token_labels, [[-1, 1, -1, -1, 2, -1, -1, -1],
                                           [-1, 0, 1, 0, 0, 0, 2, -1]])

    @pytest.mark.slow
    def test_fit_on_words_and_tags_out_by_name(self):
        keras.utils.set_random_seed(0)
        model = BertTokenTagger.from_pretrained(self.folder, num_labels=3, sequence_length=5,
                                                label_names=TAG_NAMES)
        self.assertGreater(model.count_params(), 0)
        self.assertEqual(BertTokenTagger.from_config(model.get_config()).label_names, TAG_NAMES)
        model.compile(learning_rate=1e-3)
        history = model.fit(SENTENCES * 4, TAGS * 4, batch_size=4, epochs=3, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])
        self.assertIn("accuracy", history.history)
        tags = model.predict_labels(SENTENCES)
        # Three sub-tokens fit a window: "paris" and "!" are read in a second one.
        self.assertEqual([len(row) for row in tags], [4, 3, 2])
        self.assertContainsSubset({tag for row in tags for tag in row}, set(TAG_NAMES))
        with self.assertRaisesRegex(ValueError, "sentence 1 has 3 words but 2 tags"):
            model.fit(SENTENCES, [TAGS[0], TAGS[1][:2], TAGS[2]], verbose=0)


class TextSpanTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)

    def test_question_and_context_words_pack_as_the_runner(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=12)
        questions = ["who sat?", "where does john live?"]
        # A lone U+3000 is a word (the reader's) of no token: it takes no position, as there.
        contexts = [["the", "cat", "sat", "unbelievable"],
                    ["john", "lives", "\u3000", "in", "paris"]]
        packed, word_pieces = preprocessor.pack_question_words(
            tf.constant(questions), tf.ragged.constant(contexts))
        tokenizer = preprocessor.tokenizer
        expected = pack_ids(tokenizer(questions).to_list(),
                            [tokenizer([" ".join(words)]).to_list()[0] for words in contexts],
                            12, tokenizer.cls_id, tokenizer.sep_id)
        for key in expected:
            self.assertAllEqual(packed[key], expected[key], msg=key)
        self.assertEqual(word_pieces.row_lengths(axis=2).to_list(),
                         [[1, 1, 1, 3], [1, 1, 0, 1, 1]])

    def test_answers_are_the_contexts_words_cut_as_the_runner_cuts_them(self):
        model = BertSpanModel.from_pretrained(self.folder, sequence_length=16)
        questions = ["where does john live?", "who sat?", "what?"]
        contexts = ["John lives in Paris, the cat sat on the mat.",
                    "The  cat sat\ton the mat unbelievably often.", ""]
        answers = model.predict_answers(questions, contexts)
        self.assertLen(answers, 3)
        for answer, context in zip(answers[:2], contexts):
            self.assertNotEmpty(answer)
            # The context's words joined by single spaces, the first and last perhaps cut.
            self.assertIn(answer, " ".join(context.split()))
        self.assertEqual(answers[2], "")
        self.assertEqual([len(answer.split()) for answer in model.predict_answers(
            questions[:2], contexts[:2], max_answer_length=1)], [1, 1])
        with self.assertRaisesRegex(ValueError, r"y\[0\] is 0: give each answer as"):
            model.fit((questions, contexts), [0, 1, 2], verbose=0)
