"""BertPretrainer: outputs per objective, the paper's losses against numpy, metrics, training."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from modeling import pretrainer as pt
from modeling.pretrainer import BertPretrainer
from tests.fixtures import tiny_config
from tests.modeling import harness

CONFIG = tiny_config(vocab_size=100, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
B, S, P, V = 4, 16, 5, 100


def batch(seed=0):
    """Features as the pre-training TFRecords hold them (int64 ids, float weights)."""
    rng = np.random.default_rng(seed)
    mask = np.ones((B, S), "int64")
    mask[1, 12:] = 0
    mask[3, 5:] = 0
    weights = np.ones((B, P), "float32")
    weights[0, 3:] = 0
    weights[3, 1:] = 0
    return {
        "input_ids": rng.integers(0, V, (B, S)) * mask, "input_mask": mask,
        "segment_ids": (np.arange(S) >= 6).astype("int64") * mask,
        "masked_lm_positions": (rng.integers(1, 5, (B, P)) * (weights > 0)).astype("int64"),
        "masked_lm_ids": (rng.integers(0, V, (B, P)) * (weights > 0)).astype("int64"),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, (B, 1)).astype("int64"),
    }


def np_cross_entropy(logits, labels):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def to_numpy(tensors):
    return {key: keras.ops.convert_to_numpy(value) for key, value in tensors.items()}


class PretrainerTest(harness.KerasTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.models = {objective: BertPretrainer(CONFIG, objective) for objective in pt.OBJECTIVES}

    def test_outputs_per_objective(self):
        features = batch()
        shapes = {objective: {key: tuple(value.shape) for key, value in model(features).items()}
                  for objective, model in self.models.items()}
        self.assertEqual(shapes, {"mlm_nsp": {"masked_lm_logits": (B, P, V),
                                              "next_sentence_logits": (B, 2)},
                                  "mlm": {"masked_lm_logits": (B, P, V)},
                                  "ltr": {"lm_logits": (B, S, V)}})
        self.assertTrue(self.models["ltr"].encoder.causal)
        self.assertFalse(self.models["mlm_nsp"].encoder.causal)

    def test_mlm_nsp_losses_match_numpy(self):
        features = batch()
        outputs = to_numpy(self.models["mlm_nsp"](features))
        losses = to_numpy(self.models["mlm_nsp"].pretraining_losses(features, outputs))
        ce = np_cross_entropy(outputs["masked_lm_logits"], features["masked_lm_ids"])
        weights = features["masked_lm_weights"]
        mlm = (weights * ce).sum() / (weights.sum() + 1e-5)
        nsp = np_cross_entropy(outputs["next_sentence_logits"],
                               features["next_sentence_labels"][:, 0]).mean()
        self.assertEqual(set(losses), {"masked_lm_loss", "next_sentence_loss", "loss"})
        self.assertAllClose(losses["masked_lm_loss"], mlm, rtol=1e-5, atol=0)
        self.assertAllClose(losses["next_sentence_loss"], nsp, rtol=1e-5, atol=0)
        self.assertAllClose(losses["loss"], mlm + nsp, rtol=1e-5, atol=0)

    def test_mlm_only_has_no_next_sentence_term(self):
        features = batch(1)
        outputs = to_numpy(self.models["mlm"](features))
        losses = to_numpy(self.models["mlm"].pretraining_losses(features, outputs))
        self.assertEqual(set(losses), {"masked_lm_loss", "loss"})
        self.assertAllClose(losses["loss"], losses["masked_lm_loss"], rtol=1e-7, atol=0)

    def test_left_to_right_loss_matches_numpy(self):
        features = batch(2)
        logits = to_numpy(self.models["ltr"](features))["lm_logits"]
        loss = to_numpy(self.models["ltr"].pretraining_losses(features, {"lm_logits": logits}))
        ce = np_cross_entropy(logits[:, :-1], features["input_ids"][:, 1:])
        lengths = features["input_mask"].sum(1)
        terms = [ce[row, :lengths[row] - 1] for row in range(B)]
        expected = np.concatenate(terms).mean()
        self.assertAllClose(loss["lm_loss"], expected, rtol=1e-5, atol=0)
        self.assertAllClose(loss["loss"], expected, rtol=1e-5, atol=0)

    def test_losses_and_metrics_are_those_of_the_objective_the_model_was_built_for(self):
        features = batch(6)
        keys = {}
        for objective, model in self.models.items():
            outputs = model(features)
            sums = model.pretraining_metric_sums(features, outputs)
            keys[objective] = (model.lm_loss_name,
                               sorted(model.pretraining_losses(features, outputs)), sorted(sums))
            # The metric is the loss term, summed and weighted for streaming means.
            total, weight = (float(value) for value in sums[model.lm_loss_name])
            self.assertAllClose(total / weight, float(model.pretraining_losses(
                features, outputs)[model.lm_loss_name]), rtol=1e-4, atol=0)
        self.assertEqual(keys, {
            "mlm_nsp": ("masked_lm_loss", ["loss", "masked_lm_loss", "next_sentence_loss"],
                        ["masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                         "next_sentence_loss"]),
            "mlm": ("masked_lm_loss", ["loss", "masked_lm_loss"],
                    ["masked_lm_accuracy", "masked_lm_loss"]),
            "ltr": ("lm_loss", ["lm_loss", "loss"], ["lm_accuracy", "lm_loss"])})

    def test_accuracy_helpers_match_numpy(self):
        rng = np.random.default_rng(4)
        logits = rng.normal(size=(B, P, V)).astype("float32")
        ids = rng.integers(0, V, (B, P))
        ids[:, :2] = logits[:, :2].argmax(-1)
        weights = batch()["masked_lm_weights"]
        correct = logits.argmax(-1) == ids
        expected = (correct * weights).sum() / weights.sum()
        self.assertAllClose(pt.masked_lm_accuracy(logits, ids, weights),
                            expected, rtol=1e-6, atol=0)
        nsp_logits = rng.normal(size=(B, 2)).astype("float32")
        labels = np.array([[0], [1], [1], [0]])
        self.assertAllClose(pt.next_sentence_accuracy(nsp_logits, labels),
                            (nsp_logits.argmax(-1) == labels[:, 0]).mean(), rtol=1e-7, atol=0)

    def test_left_to_right_model_does_not_look_ahead(self):
        features = batch(3)
        changed = {key: value.copy() for key, value in features.items()}
        changed["input_ids"][:, 9:] = (changed["input_ids"][:, 9:] + 1) % V
        before = to_numpy(self.models["ltr"](features))["lm_logits"]
        after = to_numpy(self.models["ltr"](changed))["lm_logits"]
        self.assertAllClose(after[:, :9], before[:, :9], rtol=1e-5, atol=1e-5)
        self.assertFalse(np.allclose(after[0, 9:], before[0, 9:]))

    @parameterized.parameters([
        ("mlm_nsp", ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
                     "cls/predictions/transform/LayerNorm/gamma",
                     "cls/predictions/transform/dense/bias",
                     "cls/predictions/transform/dense/kernel",
                     "cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]),
        ("mlm", ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
                 "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
                 "cls/predictions/transform/dense/kernel"]),
        ("ltr", ["cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
                 "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
                 "cls/predictions/transform/dense/kernel"])])
    def test_checkpoint_variables(self, objective, head_names):
        model = self.models[objective]
        variables = model.checkpoint_variables()
        encoder_names = model.encoder.checkpoint_variables()
        self.assertEqual(sorted(set(variables) - set(encoder_names)), head_names)
        self.assertEqual({id(v) for v in variables.values()}, {id(v) for v in model.weights})
        self.assertLen(variables, len(model.weights))
        trainable = {id(v) for v in model.trainable_variables}
        frozen = {name for name, v in variables.items() if id(v) not in trainable}
        expected_frozen = set() if objective == "mlm_nsp" else {"bert/pooler/dense/kernel",
                                                                "bert/pooler/dense/bias"}
        self.assertEqual(frozen, expected_frozen)

    def test_jit_compiled_train_step_reports_the_paper_loss(self):
        model = BertPretrainer(CONFIG, "mlm_nsp")
        features = {key: tf.constant(value) for key, value in batch().items()}
        expected = to_numpy(model.pretraining_losses(features, model(features)))
        before = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=True)
        logs = model.train_on_batch(features, return_dict=True)
        self.assertAllClose(logs["loss"], expected["loss"], rtol=1e-4, atol=0)
        self.assertAllClose(logs["masked_lm_loss"], expected["masked_lm_loss"], rtol=1e-3, atol=0)
        self.assertAllClose(logs["next_sentence_loss"],
                            expected["next_sentence_loss"], rtol=1e-4, atol=0)
        after = model.trainable_weights
        self.assertTrue(all(not np.array_equal(b, keras.ops.convert_to_numpy(a))
                            for b, a in zip(before, after)))

    @parameterized.product(jit_compile=[False, True], objective=["mlm_nsp", "mlm"])
    @pytest.mark.long
    def test_last_block_at_the_read_positions_trains_as_the_full_block(self, objective, jit_compile):
        """The heads read the last block at [CLS] and the masked positions only; computing
        just those rows gives the same losses and gradients, dropout masks included."""
        config = tiny_config(vocab_size=100, max_position_embeddings=16, hidden_dropout_prob=0.2,
                             attention_probs_dropout_prob=0.2)
        features = {key: tf.constant(value) for key, value in batch().items()}

        def losses_and_gradients():
            keras.utils.set_random_seed(8)
            model = BertPretrainer(config, objective)

            @tf.function(jit_compile=jit_compile)
            def step():
                with tf.GradientTape() as tape:
                    losses = model.pretraining_losses(features, model(features, training=True))
                return losses, tape.gradient(losses["loss"], model.trainable_variables)

            return step()

        losses, gradients = losses_and_gradients()
        self.compute_every_position()
        full_losses, full_gradients = losses_and_gradients()
        for name in full_losses:
            self.assertAllClose(losses[name].numpy(), full_losses[name].numpy(), rtol=1e-6, atol=0)
        for ours, reference in zip(gradients, full_gradients):
            self.assertAllClose(tf.convert_to_tensor(ours).numpy(),
                                tf.convert_to_tensor(reference).numpy(), rtol=1e-4, atol=1e-6)

    def test_evaluate_reports_weighted_metrics(self):
        model = self.models["mlm_nsp"]
        features = batch(5)
        outputs = to_numpy(model(features))
        model.compile(optimizer="sgd")
        data = tf.data.Dataset.from_tensors(features).repeat(2)
        logs = model.evaluate(data, return_dict=True, verbose=0)
        weights = features["masked_lm_weights"]
        ce = np_cross_entropy(outputs["masked_lm_logits"], features["masked_lm_ids"])
        correct = outputs["masked_lm_logits"].argmax(-1) == features["masked_lm_ids"]
        labels = features["next_sentence_labels"][:, 0]
        self.assertAllClose(logs["masked_lm_loss"],
                            (ce * weights).sum() / weights.sum(), rtol=1e-5, atol=0)
        self.assertAllClose(logs["masked_lm_accuracy"],
                            (correct * weights).sum() / weights.sum(), rtol=1e-6, atol=0)
        self.assertAllClose(logs["next_sentence_accuracy"],
                            (outputs["next_sentence_logits"].argmax(-1) == labels).mean(),
                            rtol=1e-7, atol=0)
        self.assertEqual(set(logs), {"loss", "masked_lm_loss", "masked_lm_accuracy",
                                     "next_sentence_loss",
                                     "next_sentence_accuracy"})

    def test_keras_file_and_config_round_trip(self):
        tmp_path = self.tmp_path()
        model = self.models["ltr"]
        path = str(tmp_path / "pretrainer.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertIsInstance(loaded, BertPretrainer)
        self.assertEqual(loaded.objective, "ltr")
        features = batch(6)
        self.assertAllEqual(loaded(features)["lm_logits"], model(features)["lm_logits"])
        self.assertIs(loaded.lm_head.embedding_table, loaded.encoder.embedding_table)
        clone = BertPretrainer.from_config(model.get_config())
        self.assertEqual([(v.path, v.shape) for v in clone.weights],
                         [(v.path, v.shape) for v in model.weights])

    def test_bad_objective_and_missing_features(self):
        with self.assertRaisesRegex(ValueError, "unknown pre-training objective 'nsp'"):
            BertPretrainer(CONFIG, "nsp")
        features = batch()
        del features["masked_lm_positions"]
        with self.assertRaisesRegex(ValueError, "lack masked_lm_positions"):
            BertPretrainer(CONFIG, "mlm")(features)


if __name__ == "__main__":
    tf.test.main()
