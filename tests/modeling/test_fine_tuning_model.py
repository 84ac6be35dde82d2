"""Fine-tuning heads: shapes, checkpoint names, the causal classifier and its LM loss."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from modeling.classifier import BertClassifier
from modeling.multiple_choice import BertMultipleChoice
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.token_tagger import BertTokenTagger
from network.checkpoints import export_google_checkpoint, load_weights, save_checkpoint
from network.config import ConfigError
from network.encoder import BertEncoder
from tests.fixtures import tiny_config, write_tiny_config
from tests.modeling.harness import KerasTestCase
from tests.modeling.tiny_folder import TinyFolderTestCase

CONFIG = tiny_config()
VOCAB = CONFIG.vocab_size


def _features(batch=3, length=10, choices=None):
    generator = np.random.default_rng(0)
    shape = (batch, length) if choices is None else (batch, choices, length)
    mask = np.ones(shape, np.int32)
    mask[..., 7:] = 0
    mask[0, ...] = 1
    return {"input_ids": tf.constant(generator.integers(1, VOCAB, shape), tf.int32),
            "input_mask": tf.constant(mask), "segment_ids": tf.zeros(shape, tf.int32)}


class TaskModelsTest(KerasTestCase):

    def test_output_shapes(self):
        features = _features()
        self.assertEqual(BertClassifier(CONFIG, num_labels=3)(features).shape, (3, 3))
        self.assertEqual(BertClassifier(CONFIG, num_labels=1)(features).shape, (3,))
        spans = BertSpanModel(CONFIG)(features)
        self.assertEqual(spans["start_logits"].shape, (3, 10))
        self.assertEqual(spans["end_logits"].shape, (3, 10))
        self.assertEqual(BertSpanModel(CONFIG, bilstm_units=8)(features)["end_logits"].shape,
                         (3, 10))
        self.assertEqual(BertTokenTagger(CONFIG, num_labels=5)(features).shape, (3, 10, 5))
        self.assertEqual(BertMultipleChoice(CONFIG)(_features(choices=4)).shape, (3, 4))

    def test_head_names_follow_the_original_runners(self):
        self.assertContainsSubset({"output_weights", "output_bias"},
                                  set(BertClassifier(CONFIG, num_labels=2).checkpoint_variables()))
        names = BertSpanModel(CONFIG).checkpoint_variables()
        self.assertEqual(tuple(names["cls/squad/output_weights"].shape), (2, CONFIG.hidden_size))
        with_lstm = BertSpanModel(CONFIG, bilstm_units=4).checkpoint_variables()
        self.assertTrue(any(name.startswith("bilstm/") for name in with_lstm))

    def test_pretrained_encoder_fills_classifier_and_reports_new_head(self):
        pretrainer = BertPretrainer(CONFIG)
        path = save_checkpoint(pretrainer, f"{self.create_tempdir().full_path}/pretrained")
        classifier = BertClassifier(CONFIG, num_labels=2)
        report = load_weights(classifier, path)
        self.assertEqual(report.missing, ["output_bias", "output_weights"])
        for name in report.unexpected:
            self.assertStartsWith(name, "cls/")
        self.assertAllEqual(classifier.encoder.embedding_table.numpy(),
                            pretrainer.encoder.embedding_table.numpy())

    def test_causal_classifier_reads_the_last_real_token(self):
        model = BertClassifier(CONFIG, num_labels=2, causal=True)
        features = _features()
        logits = model(features).numpy()
        # Changing a padded position must not change anything; changing the last real
        # token must (it is what the classifier reads).
        ids = features["input_ids"].numpy()
        padded = ids.copy()
        padded[1, 8] = (padded[1, 8] + 1) % VOCAB
        last = ids.copy()
        last[1, 6] = (last[1, 6] + 1) % VOCAB
        self.assertAllClose(model({**features, "input_ids": tf.constant(padded)}).numpy(),
                            logits, atol=1e-6, rtol=1e-7)
        self.assertFalse(np.allclose(model({**features, "input_ids": tf.constant(last)}).numpy()[1],
                                     logits[1]))

    def test_causal_tagger_tags_each_token_from_its_left_context(self):
        features = _features()
        ids = features["input_ids"].numpy()
        later = ids.copy()
        later[:, 4] = (later[:, 4] + 1) % VOCAB
        changed = {**features, "input_ids": tf.constant(later)}
        causal = BertTokenTagger(CONFIG, num_labels=3, causal=True)
        logits, after = causal(features).numpy(), causal(changed).numpy()
        # blind to token 4
        self.assertAllClose(after[:, :4], logits[:, :4], atol=1e-6, rtol=1e-7)
        self.assertFalse(np.allclose(after[:, 4], logits[:, 4]))
        bidirectional = BertTokenTagger(CONFIG, num_labels=3)
        self.assertFalse(np.allclose(bidirectional(changed).numpy()[:, :4],
                                     bidirectional(features).numpy()[:, :4]))
        self.assertTrue(BertTokenTagger.from_config(causal.get_config()).causal)

    def test_lm_auxiliary_loss_only_in_training(self):
        model = BertClassifier(CONFIG, num_labels=2, causal=True, lm_aux_weight=0.5)
        model(_features(), training=True)
        self.assertLen(model.losses, 1)
        self.assertGreater(float(model.losses[0]), 0)
        with self.assertRaisesRegex(ValueError, "causal"):
            BertClassifier(CONFIG, num_labels=2, lm_aux_weight=0.5)

    def test_both_orders_adds_the_last_token_vectors_of_each_order(self):
        model = BertClassifier(CONFIG, num_labels=2, causal=True, both_orders=True)
        features = _features(choices=2)
        logits = model(features).numpy()
        self.assertEqual(logits.shape, (3, 2))
        # The two orders are summed before the output layer, so swapping them changes nothing.
        swapped = {key: value[:, ::-1] for key, value in features.items()}
        self.assertAllClose(model(swapped).numpy(), logits, atol=1e-5, rtol=1e-7)
        # And the sum is of each order's last real token, read as the one-order model reads it.
        one_order = BertClassifier(CONFIG, num_labels=2, causal=True)
        one_order.set_weights(model.get_weights())
        each = [one_order.encoder({k: v[:, i] for k, v in features.items()})["sequence_output"]
                for i in range(2)]
        summed = sum(e.numpy()[np.arange(3), features["input_mask"].numpy()[:, i].sum(-1) - 1]
                     for i, e in enumerate(each))
        weights, bias = (v.numpy() for v in model.classifier.weights)
        self.assertAllClose(summed @ weights.T + bias, logits, atol=1e-4, rtol=1e-7)
        self.assertTrue(BertClassifier.from_config(model.get_config()).both_orders)
        with self.assertRaisesRegex(ValueError, "causal"):
            BertClassifier(CONFIG, num_labels=2, both_orders=True)

    def test_causal_multiple_choice_scores_each_choice_from_its_last_token(self):
        model = BertMultipleChoice(CONFIG, causal=True)
        features = _features(choices=4)
        scores = model(features).numpy()
        ids = features["input_ids"].numpy()
        padded, last = ids.copy(), ids.copy()
        padded[1, 2, 8] = (padded[1, 2, 8] + 1) % VOCAB
        last[1, 2, 6] = (last[1, 2, 6] + 1) % VOCAB
        self.assertAllClose(model({**features, "input_ids": tf.constant(padded)}).numpy(),
                            scores, atol=1e-6, rtol=1e-7)
        changed = model({**features, "input_ids": tf.constant(last)}).numpy()
        self.assertFalse(np.isclose(changed[1, 2], scores[1, 2]))
        self.assertAllClose(np.delete(changed, 2, axis=1), np.delete(scores, 2, axis=1),
                            atol=1e-6, rtol=1e-7)
        self.assertTrue(BertMultipleChoice.from_config(model.get_config()).causal)

    def test_bilstm_heads_read_the_sequence_in_both_directions(self):
        features = _features()
        classifier = BertClassifier(CONFIG, num_labels=2, causal=True, bilstm_units=4)
        logits = classifier(features).numpy()
        self.assertEqual(logits.shape, (3, 2))
        # Under causal attention alone the first token's vector ignores what follows it;
        # the BiLSTM's backward direction carries the end of the sentence back to it.
        tagger = BertTokenTagger(CONFIG, num_labels=3, causal=True, bilstm_units=4)
        ids = features["input_ids"].numpy()
        changed = ids.copy()
        changed[:, 5] = (changed[:, 5] + 1) % VOCAB
        before = tagger(features).numpy()
        after = tagger({**features, "input_ids": tf.constant(changed)}).numpy()
        self.assertFalse(np.allclose(before[:, 0], after[:, 0]))
        for model in (classifier, tagger):
            names = model.head_variables()
            # 2 x (kernel, recurrent kernel, bias)
            self.assertEqual(sum(name.startswith("bilstm/") for name in names), 6)
            self.assertEqual(type(model).from_config(model.get_config()).bilstm_units, 4)
        self.assertEqual(tuple(classifier.head_variables()["output_weights"].shape), (2, 8))
        with self.assertRaisesRegex(ValueError, "bilstm_units must be an integer >= 0, got -1"):
            BertTokenTagger(CONFIG, num_labels=3, bilstm_units=-1)

    def test_causal_span_model_scores_each_position_from_its_left_context(self):
        model = BertSpanModel(CONFIG, causal=True)
        features = _features()
        before = model(features)["start_logits"].numpy()
        ids = features["input_ids"].numpy().copy()
        ids[:, 5] = (ids[:, 5] + 1) % VOCAB
        after = model({**features, "input_ids": tf.constant(ids)})["start_logits"].numpy()
        self.assertAllClose(after[:, :5], before[:, :5], atol=1e-6, rtol=1e-7)
        self.assertFalse(np.allclose(after[:, 5], before[:, 5]))
        self.assertTrue(BertSpanModel.from_config(model.get_config()).causal)

    def test_heads_that_do_not_read_the_pooler_do_not_train_it(self):
        def pooler(model):
            return {id(v) for v in model.encoder.pooler.weights}

        for model in (BertClassifier(CONFIG, num_labels=2, causal=True),
                      BertClassifier(CONFIG, num_labels=2, bilstm_units=4),
                      BertMultipleChoice(CONFIG, causal=True)):
            self.assertEmpty(pooler(model) & {id(v) for v in model.trainable_variables})
        for model in (BertClassifier(CONFIG, num_labels=2), BertMultipleChoice(CONFIG)):
            self.assertContainsSubset(pooler(model), {id(v) for v in model.trainable_variables})

    @parameterized.product(jit_compile=[False, True],
                           model_class_and_choices=[(BertClassifier, None),
                                                    (BertMultipleChoice, 3)])
    @pytest.mark.long
    def test_heads_on_cls_alone_train_as_on_the_full_last_block(self, jit_compile,
                                                                model_class_and_choices):
        """Reading [CLS] only, the last block computes only [CLS]: same loss, same gradients."""
        model_class, choices = model_class_and_choices
        features = _features(choices=choices)
        labels = tf.constant([0, 1, 1])

        def loss_and_gradients():
            tf.keras.utils.set_random_seed(4)
            model = (model_class(CONFIG, num_labels=2) if choices is None
                     else model_class(CONFIG))

            @tf.function(jit_compile=jit_compile)
            def step():
                with tf.GradientTape() as tape:
                    logits = model(features, training=True)
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels, logits))
                return loss, tape.gradient(loss, model.trainable_variables)

            return step()

        loss, gradients = loss_and_gradients()
        self.compute_every_position()
        full_loss, full_gradients = loss_and_gradients()
        self.assertAllClose(loss.numpy(), full_loss.numpy(), rtol=1e-6, atol=0)
        for ours, reference in zip(gradients, full_gradients):
            self.assertAllClose(tf.convert_to_tensor(ours).numpy(),
                                tf.convert_to_tensor(reference).numpy(), rtol=1e-4, atol=1e-6)


class DefaultPreprocessorTest(TinyFolderTestCase):
    """`from_pretrained(name, num_labels=2).fit(strings, labels)` works without a length."""

    @pytest.mark.long
    def test_a_classifier_from_a_folder_fits_and_predicts_strings_with_no_length_given(self):
        keras.utils.set_random_seed(0)
        model = BertClassifier.from_pretrained(self.folder, num_labels=2)
        self.assertEqual(model.preprocessor.sequence_length, 64)  # the tiny model's positions
        model.compile()
        history = model.fit(["a fine film", "a dull film"], [1, 0], epochs=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        self.assertEqual(model.predict(["a fine film"], verbose=0).shape, (1, 2))
        tagger = BertTokenTagger.from_pretrained(self.folder, num_labels=3)
        self.assertLen(tagger.predict_labels([["john", "lives", "in", "paris"]])[0], 4)
        span = BertSpanModel.from_pretrained(self.folder)
        self.assertEqual(span.preprocessor.sequence_length, 64)
        # Multiple choice reads packed [batch, choices, seq] only: no preprocessor unless asked.
        self.assertIsNone(BertMultipleChoice.from_pretrained(self.folder).preprocessor)

    def test_the_default_is_128_where_the_model_has_more_positions(self):
        folder = self.root / "long"
        folder.mkdir()
        (folder / "vocab.txt").write_text((self.folder / "vocab.txt").read_text())
        write_tiny_config(folder / "bert_config.json", max_position_embeddings=512)
        export_google_checkpoint(BertEncoder(tiny_config(max_position_embeddings=512)),
                                 folder / "bert_model.ckpt")
        model = BertClassifier.from_pretrained(folder, num_labels=2)
        self.assertEqual(model.preprocessor.sequence_length, 128)
        self.assertEqual(BertClassifier.from_pretrained(folder, num_labels=2, sequence_length=512)
                         .preprocessor.sequence_length, 512)

    def test_longer_than_the_positions_is_refused_and_packed_only_stays_possible(self):
        with self.assertRaisesRegex(ValueError, r"sequence_length must be an integer from 3 to "
                                                r"the model's max_position_embeddings \(64\), "
                                                r"got 65"):
            BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=65)
        packed = BertClassifier.from_pretrained(self.folder, num_labels=2, preprocessor=None)
        self.assertIsNone(packed.preprocessor)
        with self.assertRaisesRegex(ValueError, "give either preprocessor=... or "
                                                "sequence_length / do_lower_case"):
            BertClassifier.from_pretrained(self.folder, num_labels=2, preprocessor=None,
                                           sequence_length=16)
        bare = self.root / "bare"  # a checkpoint and config without a vocabulary
        bare.mkdir()
        write_tiny_config(bare / "bert_config.json")
        export_google_checkpoint(BertEncoder(CONFIG), bare / "bert_model.ckpt")
        self.assertIsNone(BertClassifier.from_pretrained(bare, num_labels=2).preprocessor)
        with self.assertRaisesRegex(ConfigError, "no vocabulary file"):
            BertClassifier.from_pretrained(bare, num_labels=2, sequence_length=16)


if __name__ == "__main__":
    tf.test.main()
