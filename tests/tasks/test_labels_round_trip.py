"""A fine-tuned folder keeps its label names, and every reload gives them back.

`network.model_folder.write_model_folder` is what every fine-tuning task calls
to write its output folder; `modeling.load_task_model` (and the classes'
`from_pretrained`) read it back.
"""

import json
from network.model_folder import write_model_folder
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from modeling import (BertClassifier, BertConfig, BertSpanModel, BertTokenTagger, load_labels,
                      load_task_model)
from network.config import ConfigError
from tests.fixtures import TINY_CONFIG, TestCase

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
INPUTS = {"input_ids": tf.constant([[2, 5, 6, 7, 3]]), "input_mask": tf.ones([1, 5], tf.int32),
          "segment_ids": tf.zeros([1, 5], tf.int32)}


class LabelsRoundTripTest(TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.tmp_path()
        (self.root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
        self.config = BertConfig.from_dict({**TINY_CONFIG, "vocab_size": len(VOCAB)})

    def _save(self, model, labels, name="out") -> Path:
        out = self.root / name
        out.mkdir(exist_ok=True)
        write_model_folder(out, task_model=model, config=self.config,
                           vocabulary=str(self.root / "vocab.txt"), labels=labels)
        return out

    def test_classifier_reloads_without_num_labels_and_with_names(self):
        labels = ["contradiction", "entailment", "neutral"]
        keras.utils.set_random_seed(1)
        original = BertClassifier(self.config, num_labels=3)
        out = self._save(original, labels)
        self.assertEqual((out / "labels.txt").read_text(), "contradiction\nentailment\nneutral\n")
        self.assertEqual(load_labels(out), labels)
        self.assertEqual(load_labels(out / "model.ckpt"), labels)
        reloaded = BertClassifier.from_pretrained(out)
        self.assertEqual(reloaded.num_labels, 3)
        self.assertEqual(list(reloaded.label_names), labels)
        self.assertAllClose(reloaded(INPUTS, training=False), original(INPUTS, training=False))

    def test_a_multi_label_folder_reloads_multi_label_with_its_threshold(self):
        labels = ["film", "neg", "pos"]
        keras.utils.set_random_seed(1)
        original = BertClassifier(self.config, num_labels=3, multi_label=True, threshold=0.3)
        out = self._save(original, labels)
        settings = json.loads((out / "model_settings.json").read_text())
        self.assertEqual((settings["model"], settings["multi_label"], settings["threshold"]),
                         ("BertClassifier", True, 0.3))
        for source in (out, out / "model.ckpt"):
            reloaded = BertClassifier.from_pretrained(source)
            self.assertEqual((reloaded.multi_label, reloaded.threshold), (True, 0.3))
        logits = reloaded.predict(["the cat sat"], verbose=0)
        probabilities = 1 / (1 + np.exp(-logits[0]))
        expected = [label for label, p in zip(labels, probabilities) if p > 0.3]
        self.assertEqual(reloaded.predict_labels(["the cat sat"]), [expected])
        self.assertEqual(load_task_model(BertClassifier, out, threshold=0.7).threshold, 0.7)
        single = load_task_model(BertClassifier, out, multi_label=False)
        self.assertEqual((single.multi_label, single.threshold), (False, 0.5))
        # A single-label model saved over it rewrites the file; the folder reloads single-label.
        self._save(BertClassifier(self.config, num_labels=3), labels)
        self.assertFalse(json.loads((out / "model_settings.json").read_text())["multi_label"])
        self.assertFalse(BertClassifier.from_pretrained(out).multi_label)

    def test_tagger_reloads_with_its_tags(self):
        tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
        out = self._save(BertTokenTagger(self.config, len(tags)), tags)
        reloaded = load_task_model(BertTokenTagger, out)
        self.assertEqual((reloaded.num_labels, list(reloaded.label_names)), (len(tags), tags))

    def test_another_head_size_asks_for_a_new_head_without_the_names(self):
        out = self._save(BertClassifier(self.config, num_labels=2), ["neg", "pos"])
        tagger = load_task_model(BertTokenTagger, out, num_labels=5)
        self.assertEqual(tagger.num_labels, 5)
        self.assertFalse(getattr(tagger, "label_names", None))

    def test_a_model_without_labels_removes_an_earlier_runs_file(self):
        out = self._save(BertClassifier(self.config, num_labels=2), ["neg", "pos"])
        self._save(BertSpanModel(self.config), None)
        self.assertIsNone(load_labels(out))
        self.assertFalse((out / "labels.txt").exists())

    def test_bad_labels_are_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "non-empty single lines"):
            self._save(BertClassifier(self.config, num_labels=2), ["neg", "very\npositive"])
        folder = self.root / "broken"
        folder.mkdir()
        (folder / "labels.txt").write_text("neg\n\npos\n")
        with self.assertRaisesRegex(ConfigError, r"broken/labels.txt: expected one non-empty"):
            load_labels(folder)
