"""The shared harness over the encoder and every task model (shapes, configs, saving, dtype)."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from modeling.classifier import BertClassifier
from modeling.feature_tagger import FeatureTagger
from modeling.multiple_choice import BertMultipleChoice
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.token_tagger import BertTokenTagger
from network.encoder import BertEncoder
from tests.fixtures import tiny_config
from tests.modeling import harness

CONFIG = tiny_config(vocab_size=40, hidden_size=16, intermediate_size=32,
                     max_position_embeddings=16)
BATCH, LENGTH, CHOICES, PREDICTIONS = 2, 8, 3, 3


def _encoder_inputs(shape) -> dict:
    generator = np.random.default_rng(0)
    mask = np.ones(shape, np.int32)
    mask[..., 6:] = 0
    return {"input_ids": generator.integers(1, CONFIG.vocab_size, shape).astype(np.int32),
            "input_mask": mask, "segment_ids": np.zeros(shape, np.int32)}


def _pretraining_inputs() -> dict:
    inputs = _encoder_inputs((BATCH, LENGTH))
    inputs["masked_lm_positions"] = np.tile(np.arange(1, PREDICTIONS + 1, dtype=np.int32),
                                            (BATCH, 1))
    return inputs


def _tagger_inputs() -> dict:
    generator = np.random.default_rng(1)
    return {"features": generator.normal(size=(BATCH, LENGTH, 12)).astype(np.float32),
            "input_mask": _encoder_inputs((BATCH, LENGTH))["input_mask"]}


B, L, H, V = BATCH, LENGTH, CONFIG.hidden_size, CONFIG.vocab_size
# name: (factory, inputs, output shapes, output dtypes under dtype="mixed_float16")
CASES = {
    "encoder": (lambda **kw: BertEncoder(CONFIG, **kw), _encoder_inputs((B, L)),
                {"sequence_output": (B, L, H), "pooled_output": (B, H)},
                {"sequence_output": "float16", "pooled_output": "float16"}),
    "causal_encoder": (lambda **kw: BertEncoder(CONFIG, causal=True, **kw),
                       _encoder_inputs((B, L)),
                       {"sequence_output": (B, L, H), "pooled_output": (B, H)},
                       {"sequence_output": "float16", "pooled_output": "float16"}),
    "pretrainer": (lambda **kw: BertPretrainer(CONFIG, "mlm_nsp", **kw), _pretraining_inputs(),
                   {"masked_lm_logits": (B, PREDICTIONS, V), "next_sentence_logits": (B, 2)},
                   {"masked_lm_logits": "float32", "next_sentence_logits": "float32"}),
    "ltr_pretrainer": (lambda **kw: BertPretrainer(CONFIG, "ltr", **kw),
                       _encoder_inputs((B, L)), {"lm_logits": (B, L, V)},
                       {"lm_logits": "float32"}),
    "classifier": (lambda **kw: BertClassifier(CONFIG, num_labels=3, **kw),
                   _encoder_inputs((B, L)), (B, 3), "float32"),
    "causal_classifier": (lambda **kw: BertClassifier(CONFIG, num_labels=2, causal=True,
                                                      lm_aux_weight=0.5, **kw),
                          _encoder_inputs((B, L)), (B, 2), "float32"),
    "regressor": (lambda **kw: BertClassifier(CONFIG, num_labels=1, **kw),
                  _encoder_inputs((B, L)), (B,), "float32"),
    "multiple_choice": (lambda **kw: BertMultipleChoice(CONFIG, **kw),
                        _encoder_inputs((B, CHOICES, L)), (B, CHOICES), "float32"),
    "span": (lambda **kw: BertSpanModel(CONFIG, **kw), _encoder_inputs((B, L)),
             {"start_logits": (B, L), "end_logits": (B, L)},
             {"start_logits": "float32", "end_logits": "float32"}),
    "span_bilstm": (lambda **kw: BertSpanModel(CONFIG, bilstm_units=4, **kw),
                    _encoder_inputs((B, L)), {"start_logits": (B, L), "end_logits": (B, L)},
                    {"start_logits": "float32", "end_logits": "float32"}),
    "token_tagger": (lambda **kw: BertTokenTagger(CONFIG, num_labels=5, **kw),
                     _encoder_inputs((B, L)), (B, L, 5), "float32"),
    "feature_tagger": (lambda **kw: FeatureTagger(num_labels=4, lstm_units=6,
                                                  num_lstm_layers=2, **kw),
                       _tagger_inputs(), (B, L, 4), "float32"),
}


_BUILT = {}  # name: the case's model as its factory builds it without arguments


def _default_model(name: str) -> keras.Model:
    """The model `CASES[name]` builds with no arguments, built once for every read-only check
    of it (its outputs, its config, its `.keras` file, its serving spec)."""
    if name not in _BUILT:
        _BUILT[name] = CASES[name][0]()
    return _BUILT[name]


def _sharing(name: str):
    """`CASES[name]`'s factory, giving the one model built without arguments; with
    arguments (`dtype=`) each call builds anew through the constructor."""
    make = CASES[name][0]
    return lambda **kwargs: make(**kwargs) if kwargs else _default_model(name)


class ModelContractsTest(harness.KerasTestCase):

    @parameterized.named_parameters((name, name) for name in sorted(CASES))
    def test_model_contract(self, name):
        _, inputs, shapes, dtypes = CASES[name]
        self.run_model_test(_sharing(name), inputs, shapes, dtypes)

    @parameterized.named_parameters((name, name) for name in sorted(CASES)
                                    if name != "feature_tagger")  # not a BERT model: no export
    def test_serving_spec_states_what_the_model_reads_and_returns(self, name):
        _, inputs, shapes, _ = CASES[name]
        model = _default_model(name)
        spec = model.serving_spec()
        self.assertEqual(np.ndim(inputs["input_ids"]), spec.input_rank)
        outputs = model(inputs, training=False)
        if spec.returns_dict:
            self.assertContainsSubset(spec.outputs, outputs.keys())
            self.assertEqual(set(spec.outputs), set(shapes))  # every output the model means
        else:
            self.assertLen(spec.outputs, 1)
            self.assertEqual(tuple(outputs.shape), shapes)
        if spec.num_labels is not None:
            self.assertEqual(spec.num_labels, shapes[-1] if len(shapes) > 1 else 1)

    @parameterized.named_parameters(
        ("single_label", {"num_labels": 3}, "softmax", None, False),
        ("regression", {"num_labels": 1}, None, None, False),
        ("multi_label", {"num_labels": 3, "multi_label": True, "threshold": 0.3}, "sigmoid",
         0.3, False),
        ("windows", {"num_labels": 2, "long_texts": "windows", "window_stride": 3}, "softmax",
         None, True))
    def test_a_classifiers_settings_are_its_spec(self, settings, activation, threshold, windows):
        spec = BertClassifier(CONFIG, **settings).serving_spec()
        self.assertEqual((spec.kind, spec.activation, spec.threshold, spec.windows),
                         ("classifier", activation, threshold, windows))
        self.assertEqual(spec.window_stride, settings.get("window_stride"))

    def test_how_a_model_reads_its_inputs_is_its_spec(self):
        both = BertClassifier(CONFIG, 2, causal=True, both_orders=True).serving_spec()
        self.assertEqual((both.input_rank, both.both_orders, both.causal), (3, True, True))
        tagger = BertTokenTagger(CONFIG, 2, bilstm_units=4, label_names=["O", "B-PER"],
                                 window_stride=2).serving_spec()
        self.assertEqual((tagger.windows, tagger.window_stride, tagger.bilstm_units,
                          tagger.label_names), (True, 2, 4, ("O", "B-PER")))


if __name__ == "__main__":
    tf.test.main()
