"""A fine-tuned folder keeps the model's settings, and reloads as the model it was saved from.

`network.model_folder.write_model_folder` writes every fine-tuning run's
folder; `from_pretrained` / `load_task_model` read it back. The logits of
the reloaded model must be the saved model's: a causal encoder read
bidirectionally, a head read without its BiLSTM, or a long text cut where it
was read through windows would give others from the same weights.
"""

import json

import numpy as np
import pytest

from modeling import BertClassifier, BertEncoder, BertTokenTagger, load_config, load_task_model
from network.checkpoints import CheckpointError
from network.config import ConfigError
from network.model_folder import write_model_folder
from tests.modeling.tiny_folder import TinyFolderTestCase

TEXTS = ["john lives in paris .", "the cat sat on the mat , who was there ?"]
# Longer than a window of 8 (six sub-tokens each), so windows and truncation differ.
LONG_TEXTS = ["the film was great , the plot was dull and the acting was boring .",
              "john lives in paris . the cat sat on the mat . who was there ?"]


def randomize_head(model) -> None:
    """Head (and BiLSTM) weights away from their initialization, so a mix-up would show."""
    generator = np.random.default_rng(3)
    for variable in model.head_variables().values():
        variable.assign(generator.normal(0, 0.5, variable.shape).astype(np.float32))


class RunFolderTestCase(TinyFolderTestCase):
    """Saves models as the runners do, into folders beside the tiny pre-trained one."""

    def save(self, model, labels, name: str):
        out = self.tmp_path() / name
        write_model_folder(out, task_model=model, config=load_config(self.folder),
                           vocabulary=str(self.folder / "vocab.txt"), labels=labels)
        return out

    def fine_tuned(self, model_class, name: str, labels, sequence_length: int = 16, **kwargs):
        """A task model on the tiny encoder, its head randomized, saved; (model, folder)."""
        model = model_class.from_pretrained(self.folder, sequence_length=sequence_length,
                                            **kwargs)
        randomize_head(model)
        return model, self.save(model, labels, name)


class ModelSettingsRoundTripTest(RunFolderTestCase):

    def assert_same_logits(self, saved, reloaded, inputs):
        self.assertAllClose(saved.predict(inputs, verbose=0), reloaded.predict(inputs, verbose=0),
                            atol=1e-6, rtol=0)

    def test_a_causal_classifier_reloads_left_to_right(self):
        model, out = self.fine_tuned(BertClassifier, "causal", ["a", "b", "c"], num_labels=3,
                                     causal=True)
        self.assertEqual(json.loads((out / "model_settings.json").read_text())["causal"], True)
        expected = model.predict(TEXTS, verbose=0)  # once, for both reloads
        for reloaded in (BertClassifier.from_pretrained(out, sequence_length=16),
                         load_task_model(BertClassifier, out / "model.ckpt",
                                         preprocessor=model.preprocessor)):
            self.assertTrue(reloaded.causal)
            self.assertAllClose(expected, reloaded.predict(TEXTS, verbose=0), atol=1e-6, rtol=0)

    @pytest.mark.long
    def test_bilstm_models_reload_with_their_bilstm(self):
        cases = [(BertClassifier, ["neg", "pos"], TEXTS),
                 (BertTokenTagger, ["O", "B-PER", "B-LOC"], [text.split() for text in TEXTS])]
        for model_class, labels, inputs in cases:
            with self.subTest(model_class.__name__):
                # Both in one process: the BiLSTM's checkpoint names do not depend on how
                # many LSTMs Keras built before it.
                model, out = self.fine_tuned(model_class, model_class.__name__, labels,
                                             num_labels=len(labels), bilstm_units=4)
                expected = model.predict(inputs, verbose=0)
                reloaded = model_class.from_pretrained(out, sequence_length=16)
                self.assertEqual(reloaded.bilstm_units, 4)
                self.assertAllClose(expected, reloaded.predict(inputs, verbose=0), atol=1e-6,
                                    rtol=0)

    @pytest.mark.long
    def test_a_windowed_classifier_reloads_reading_long_texts_through_windows(self):
        model, out = self.fine_tuned(BertClassifier, "windows", ["neg", "pos"],
                                     sequence_length=8, num_labels=2, long_texts="windows",
                                     window_stride=3)
        reloaded = BertClassifier.from_pretrained(out, sequence_length=8)
        self.assertEqual((reloaded.long_texts, reloaded.window_stride), ("windows", 3))
        self.assert_same_logits(model, reloaded, LONG_TEXTS)
        # The caller's reading wins: truncated, the long texts give other logits.
        truncated = BertClassifier.from_pretrained(out, sequence_length=8, long_texts="truncate")
        self.assertEqual((truncated.long_texts, truncated.window_stride), ("truncate", None))
        self.assertNotAllClose(model.predict(LONG_TEXTS, verbose=0),
                               truncated.predict(LONG_TEXTS, verbose=0))

    def test_a_regression_folder_reloads_without_num_labels(self):
        model, out = self.fine_tuned(BertClassifier, "stsb", None, num_labels=1)
        reloaded = BertClassifier.from_pretrained(out, sequence_length=16)
        self.assertEqual(reloaded.num_labels, 1)
        self.assert_same_logits(model, reloaded, TEXTS)

    def test_a_gpt_similarity_folder_reloads_reading_both_orders(self):
        model, out = self.fine_tuned(BertClassifier, "stsb", None, num_labels=1, causal=True,
                                     both_orders=True)
        reloaded = load_task_model(BertClassifier, out)
        self.assertEqual((reloaded.num_labels, reloaded.causal, reloaded.both_orders),
                         (1, True, True))
        ids = np.array([[[2, 15, 16, 17, 18, 3], [2, 8, 9, 6, 3, 0]]], np.int32)  # [1, 2, seq]
        packed = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                  "segment_ids": np.zeros_like(ids)}
        self.assertAllClose(model(packed, training=False), reloaded(packed, training=False),
                            atol=1e-6, rtol=0)

    def test_a_setting_the_saved_weights_were_trained_with_cannot_be_contradicted(self):
        _, out = self.fine_tuned(BertClassifier, "causal", ["a", "b"], num_labels=2,
                                 causal=True, lm_aux_weight=0.5)
        with self.assertRaisesRegex(ValueError, r"causal=False contradicts \S*causal/"
                                    r"model_settings\.json: causal=True"):
            BertClassifier.from_pretrained(out, causal=False)
        # A setting the weights do not depend on: the caller's value wins.
        self.assertEqual(load_task_model(BertClassifier, out, lm_aux_weight=0.0).lm_aux_weight,
                         0.0)
        _, out = self.fine_tuned(BertTokenTagger, "bilstm", ["O", "B"], num_labels=2,
                                 bilstm_units=4)
        with self.assertRaisesRegex(ValueError, r"bilstm_units=2 contradicts \S*bilstm/"
                                    r"model_settings\.json: bilstm_units=4"):
            load_task_model(BertTokenTagger, out, bilstm_units=2)

    def test_a_new_head_keeps_what_the_encoder_was_trained_with(self):
        _, out = self.fine_tuned(BertClassifier, "causal", ["a", "b"], num_labels=2,
                                 causal=True, lm_aux_weight=0.5)
        tagger = load_task_model(BertTokenTagger, out, num_labels=4)
        self.assertTrue(tagger.causal)
        self.assertIsNone(tagger.label_names)
        self.assertTrue(load_task_model(BertEncoder, out).causal)
        # A new head may also read the encoder otherwise: nothing was trained for it.
        self.assertFalse(load_task_model(BertTokenTagger, out, num_labels=4,
                                         causal=False).causal)
        with self.assertRaisesRegex(ValueError, r"causal holds a BertClassifier; give "
                                    "num_labels for a new BertTokenTagger head"):
            load_task_model(BertTokenTagger, out)

    def test_a_bad_model_settings_file_is_named(self):
        _, out = self.fine_tuned(BertClassifier, "out", ["a", "b"], num_labels=2)
        file = out / "model_settings.json"
        cases = [("{", "invalid JSON"),
                 ('{"causal": true}', "expected an object with the model's class"),
                 ('{"model": "BertClassifier", "bilstm_units": -1}',
                  "bilstm_units must be an integer >= 0, got -1"),
                 ('{"model": "BertClassifier", "causal": "yes"}',
                  "causal must be True or False, got 'yes'"),
                 ('{"model": "BertClassifier", "long_texts": "all"}', "long_texts must be"),
                 ('{"model": "BertClassifier", "num_labels": 3}',
                  "num_labels=3, but the folder names 2 labels")]
        for text, message in cases:
            with self.subTest(text):
                file.write_text(text)
                with self.assertRaisesRegex(ConfigError, r"out/(model_settings\.json|labels\.txt)"
                                            f": .*{message}"):
                    BertClassifier.from_pretrained(out)

    def test_a_weight_the_saved_model_had_but_its_checkpoint_lacks_is_refused(self):
        # 2 x 16 BiLSTM units are as wide as the encoder (32): the head's shape fits, so
        # only the missing BiLSTM tells this folder from the model it claims to hold.
        _, out = self.fine_tuned(BertClassifier, "out", ["a", "b"], num_labels=2)
        file = out / "model_settings.json"
        file.write_text(json.dumps({**json.loads(file.read_text()), "bilstm_units": 16}))
        with self.assertRaisesRegex(CheckpointError, r"6 weights of the BertClassifier saved "
                                    r"there are not in its checkpoint: bilstm/"):
            BertClassifier.from_pretrained(out)
