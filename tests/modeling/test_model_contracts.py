"""The shared harness over the encoder and every task model (shapes, configs, saving, dtype)."""

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


class ModelContractsTest(harness.KerasTestCase):

    @parameterized.named_parameters((name, name) for name in sorted(CASES))
    def test_model_contract(self, name):
        make, inputs, shapes, dtypes = CASES[name]
        self.run_model_test(make, inputs, shapes, dtypes)


if __name__ == "__main__":
    tf.test.main()
