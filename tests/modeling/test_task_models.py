"""Fine-tuning heads: shapes, checkpoint names, the causal classifier and its LM loss."""

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import load_weights, save_checkpoint
from modeling.config import BertConfig
from modeling.pretrainer import BertPretrainer
from modeling.task_models import (BertClassifier, BertMultipleChoice, BertSpanModel,
                                  BertTokenTagger)

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32)


def _features(batch=3, length=10, choices=None):
    generator = np.random.default_rng(0)
    shape = (batch, length) if choices is None else (batch, choices, length)
    mask = np.ones(shape, np.int32)
    mask[..., 7:] = 0
    mask[0, ...] = 1
    return {"input_ids": tf.constant(generator.integers(1, 50, shape), tf.int32),
            "input_mask": tf.constant(mask), "segment_ids": tf.zeros(shape, tf.int32)}


def test_output_shapes():
    features = _features()
    assert BertClassifier(CONFIG, num_labels=3)(features).shape == (3, 3)
    assert BertClassifier(CONFIG, num_labels=1)(features).shape == (3,)
    spans = BertSpanModel(CONFIG)(features)
    assert spans["start_logits"].shape == (3, 10) and spans["end_logits"].shape == (3, 10)
    assert BertSpanModel(CONFIG, bilstm_units=8)(features)["end_logits"].shape == (3, 10)
    assert BertTokenTagger(CONFIG, num_labels=5)(features).shape == (3, 10, 5)
    assert BertMultipleChoice(CONFIG)(_features(choices=4)).shape == (3, 4)


def test_head_names_follow_the_original_runners():
    assert {"output_weights", "output_bias"} <= set(
        BertClassifier(CONFIG, num_labels=2).checkpoint_variables())
    names = BertSpanModel(CONFIG).checkpoint_variables()
    assert tuple(names["cls/squad/output_weights"].shape) == (2, 16)
    with_lstm = BertSpanModel(CONFIG, bilstm_units=4).checkpoint_variables()
    assert any(name.startswith("bilstm/") for name in with_lstm)


def test_pretrained_encoder_fills_classifier_and_reports_new_head(tmp_path):
    pretrainer = BertPretrainer(CONFIG)
    path = save_checkpoint(pretrainer, tmp_path / "pretrained")
    classifier = BertClassifier(CONFIG, num_labels=2)
    report = load_weights(classifier, path)
    assert report.missing == ["output_bias", "output_weights"]
    assert all(name.startswith("cls/") for name in report.unexpected)
    np.testing.assert_array_equal(classifier.encoder.embedding_table.numpy(),
                                  pretrainer.encoder.embedding_table.numpy())


def test_causal_classifier_reads_the_last_real_token():
    model = BertClassifier(CONFIG, num_labels=2, causal=True)
    features = _features()
    logits = model(features).numpy()
    # Changing a padded position must not change anything; changing the last real
    # token must (it is what the classifier reads).
    ids = features["input_ids"].numpy()
    padded = ids.copy()
    padded[1, 8] = (padded[1, 8] + 1) % 50
    last = ids.copy()
    last[1, 6] = (last[1, 6] + 1) % 50
    np.testing.assert_allclose(model({**features, "input_ids": tf.constant(padded)}).numpy(),
                               logits, atol=1e-6)
    assert not np.allclose(model({**features, "input_ids": tf.constant(last)}).numpy()[1],
                           logits[1])


def test_causal_tagger_tags_each_token_from_its_left_context():
    features = _features()
    ids = features["input_ids"].numpy()
    later = ids.copy()
    later[:, 4] = (later[:, 4] + 1) % 50
    changed = {**features, "input_ids": tf.constant(later)}
    causal = BertTokenTagger(CONFIG, num_labels=3, causal=True)
    logits, after = causal(features).numpy(), causal(changed).numpy()
    np.testing.assert_allclose(after[:, :4], logits[:, :4], atol=1e-6)  # blind to token 4
    assert not np.allclose(after[:, 4], logits[:, 4])
    bidirectional = BertTokenTagger(CONFIG, num_labels=3)
    assert not np.allclose(bidirectional(changed).numpy()[:, :4],
                           bidirectional(features).numpy()[:, :4])
    assert BertTokenTagger.from_config(causal.get_config()).causal


def test_lm_auxiliary_loss_only_in_training():
    model = BertClassifier(CONFIG, num_labels=2, causal=True, lm_aux_weight=0.5)
    model(_features(), training=True)
    assert len(model.losses) == 1 and float(model.losses[0]) > 0
    with pytest.raises(ValueError, match="causal"):
        BertClassifier(CONFIG, num_labels=2, lm_aux_weight=0.5)
