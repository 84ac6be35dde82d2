"""Fine-tuned models exported as Hugging Face's BertFor... classes give transformers' logits."""

import json

import numpy as np
import pytest
import tensorflow as tf

from export.huggingface_tasks import export_huggingface_task
from export.model_exports import export_model
from export.sources import export_source
from modeling import (BertClassifier, BertMultipleChoice, BertSpanModel, BertTokenTagger,
                      load_config, load_labels)
from network.config import ConfigError
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import TinyFolderTestCase, tiny_folder
from tests.reference_python import (NO_REFERENCE, minilm_or_skip, reference_python,
                                    run_reference)

TEXTS = ["john lives in paris .", "the cat sat on the mat , who was there ?"]
# Loads each exported folder with its transformers class; prints the logits.
_TRANSFORMERS = """
import json, sys
import numpy as np, torch, transformers
results = []
for folder, architecture, inputs in json.loads(sys.argv[1]):
    model = getattr(transformers, architecture).from_pretrained(folder).eval()
    arrays = np.load(inputs)
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor(arrays["input_ids"]).long(),
                        attention_mask=torch.tensor(arrays["input_mask"]).long(),
                        token_type_ids=torch.tensor(arrays["segment_ids"]).long())
    logits = ([outputs.start_logits.numpy().tolist(), outputs.end_logits.numpy().tolist()]
              if architecture == "BertForQuestionAnswering" else outputs.logits.numpy().tolist())
    results.append({"logits": logits, "id2label": model.config.id2label})
print(json.dumps(results))
"""


def _randomize_head(model) -> None:
    """Head weights and biases away from their initial zeros, so a mix-up would show."""
    generator = np.random.default_rng(3)
    for variable in model.head_variables().values():
        variable.assign(generator.normal(0, 0.5, variable.shape).astype(np.float32))


def _ours(model, packed: dict) -> list:
    outputs = model(packed, training=False)
    if isinstance(outputs, dict):
        return [outputs["start_logits"].numpy(), outputs["end_logits"].numpy()]
    return outputs.numpy()


class HuggingFaceTaskLayoutTest(TestCase):

    def _models(self, folder, sequence_length: int):
        return [
            ("BertForSequenceClassification", BertClassifier.from_pretrained(
                folder, num_labels=3, sequence_length=sequence_length,
                label_names=["negative", "neutral", "positive"]), False),
            ("BertForSequenceClassification", BertClassifier.from_pretrained(
                folder, num_labels=1, sequence_length=sequence_length), False),
            ("BertForTokenClassification", BertTokenTagger.from_pretrained(
                folder, num_labels=4, sequence_length=sequence_length,
                label_names=["O", "B-PER", "I-PER", "B-LOC"]), False),
            ("BertForQuestionAnswering", BertSpanModel.from_pretrained(
                folder, sequence_length=sequence_length), False),
            ("BertForMultipleChoice", BertMultipleChoice.from_pretrained(
                folder, sequence_length=sequence_length), True),
        ]

    def _check_against_transformers(self, folder, sequence_length: int):
        python = reference_python()
        if python is None:
            self.skipTest(NO_REFERENCE)
        jobs, expected = [], []
        for index, (architecture, model, choices) in enumerate(
                self._models(folder, sequence_length)):
            _randomize_head(model)
            out = self.tmp_path() / f"export_{index}"
            export_model(model, out, "huggingface")  # the model object itself
            self.assertEqual(json.loads((out / "config.json").read_text())["architectures"],
                             [architecture])
            texts = ((tf.constant(TEXTS), tf.constant(TEXTS[::-1]))
                     if isinstance(model, BertSpanModel) else tf.constant(TEXTS))
            packed = {key: value.numpy() for key, value in model.preprocessor(texts).items()
                      if key != "word_positions"}  # token logits, as transformers gives them
            if choices:  # two choices per question: [batch, 2, seq]
                packed = {key: np.stack([value, value[::-1]], axis=1)
                          for key, value in packed.items()}
            np.savez(out / "inputs.npz", **packed)
            jobs.append([str(out), architecture, str(out / "inputs.npz")])
            expected.append((model, _ours(model, packed)))
        results = run_reference(python, _TRANSFORMERS, json.dumps(jobs))
        for (model, ours), theirs in zip(expected, results):
            logits = np.asarray(theirs["logits"], np.float32)
            if getattr(model, "num_labels", None) == 1:
                logits = logits[:, 0]
            self.assertAllClose(ours, logits, atol=1e-4, rtol=0, msg=model.name)
            if isinstance(model, (BertClassifier, BertTokenTagger)):
                names = model.label_names or [f"LABEL_{index}"
                                              for index in range(model.num_labels)]
                self.assertEqual(theirs["id2label"],
                                 {str(index): name for index, name in enumerate(names)})

    def test_each_task_model_gives_transformers_logits(self):
        self._check_against_transformers(tiny_folder(self.tmp_path()), 16)

    @pytest.mark.long
    @pytest.mark.assets
    def test_on_the_real_minilm(self):
        folder = minilm_or_skip(self)
        self._check_against_transformers(folder, 32)

    def test_models_no_bert_class_computes_are_refused(self):
        folder = tiny_folder(self.tmp_path())
        config = load_config(folder)
        cases = [(BertClassifier(config, num_labels=2, bilstm_units=4),
                  "BertClassifier reads the encoder through a BiLSTM \\(bilstm_units=4\\)"),
                 (BertClassifier(config, num_labels=2, causal=True),
                  "left-to-right model \\(causal=True\\)")]
        for model, message in cases:
            with self.assertRaisesRegex(ValueError, message):
                export_huggingface_task(model, config, self.tmp_path())
            out = self.tmp_path() / "refused"
            with self.assertRaisesRegex(ValueError, message):
                export_model(model, out, "huggingface")
            self.assertFalse(out.exists())


class HuggingFaceTaskFolderLoadsTest(TinyFolderTestCase):
    """A `BertFor...` folder (here our own export) loads back with its head and labels."""

    @pytest.mark.long
    def test_exported_classifiers_and_tagger_load_back_as_they_were(self):
        words = [text.split() for text in TEXTS]
        cases = [  # (model class, its arguments, inputs, label names after the round trip)
            (BertClassifier, {"num_labels": 3, "label_names": ["neg", "neutral", "pos"]},
             TEXTS, ["neg", "neutral", "pos"]),
            (BertClassifier, {"num_labels": 3, "multi_label": True}, TEXTS, None),
            (BertClassifier, {"num_labels": 1}, TEXTS, None),
            (BertTokenTagger, {"num_labels": 4, "label_names": ["O", "B-PER", "I-PER", "B-LOC"]},
             words, ["O", "B-PER", "I-PER", "B-LOC"]),
        ]
        for index, (model_class, arguments, inputs, names) in enumerate(cases):
            with self.subTest(f"{model_class.__name__} {arguments}"):
                model = model_class.from_pretrained(self.folder, sequence_length=16, **arguments)
                _randomize_head(model)
                out = self.tmp_path() / f"hf_{index}"
                export_model(model, out, "huggingface")
                for reloaded in (model_class.from_pretrained(out, sequence_length=16),
                                 export_source(out).model):
                    self.assertIsInstance(reloaded, model_class)
                    self.assertEqual((reloaded.num_labels, reloaded.label_names),
                                     (model.num_labels, names))
                    self.assertEqual(getattr(reloaded, "multi_label", None),
                                     getattr(model, "multi_label", None))
                self.assertEqual(load_labels(out), names)
                reloaded = model_class.from_pretrained(out, sequence_length=16)
                self.assertAllClose(model.predict(inputs, verbose=0),
                                    reloaded.predict(inputs, verbose=0), atol=1e-6, rtol=0)

    def test_a_bad_id2label_or_problem_type_is_named(self):
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16)
        out = self.tmp_path() / "hf"
        export_model(model, out, "huggingface")
        config = json.loads((out / "config.json").read_text())
        cases = [({"id2label": {"0": "neg", "2": "pos"}}, "id2label must map"),
                 ({"problem_type": "ranking"}, "problem_type must be"),
                 ({"problem_type": "regression"}, "a regression \\(problem_type\\) with 2")]
        for change, message in cases:
            with self.subTest(change):
                (out / "config.json").write_text(json.dumps({**config, **change}))
                with self.assertRaisesRegex(ConfigError, f"hf/config.json: {message}"):
                    BertClassifier.from_pretrained(out)
