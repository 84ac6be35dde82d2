"""Table 7's feature choices, the masked BiLSTM tagger, and the feature cache writer."""

import contextlib
import io
import os

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from modeling.feature_tagger import (
    FEATURE_LAYERS,
    FeatureBatches,
    FeatureTagger,
    cached_features,
    check_feature_layers,
    combine_hidden_states,
    feature_layers_for,
    feature_width,
    write_features,
)
from network.encoder import BertEncoder
from training.divergence import FitDiverged
from tests.fixtures import TINY_CONFIG, TestCase, tiny_config

HIDDEN = TINY_CONFIG["hidden_size"]


def _arrays() -> dict[str, np.ndarray]:
    generator = np.random.default_rng(0)
    input_ids = generator.integers(5, TINY_CONFIG["vocab_size"], (5, 12)).astype(np.int32)
    input_mask = np.ones_like(input_ids)
    input_mask[1, 7:] = 0
    return {"input_ids": input_ids * input_mask, "input_mask": input_mask,
            "segment_ids": np.zeros_like(input_ids)}


class FeatureTaggerTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """One 5-block encoder and its hidden states, shared by the tests that only read them."""
        super().setUpClass()
        cls.encoder = BertEncoder(tiny_config(num_hidden_layers=5), output_hidden_states=True)
        cls.arrays = _arrays()
        cls.states = [np.asarray(state)
                      for state in cls.encoder(cls.arrays, training=False)["hidden_states"]]

    @parameterized.parameters([
        ("embeddings", HIDDEN), ("second_to_last", HIDDEN), ("last", HIDDEN),
        ("sum_last_four", HIDDEN), ("concat_last_four", 4 * HIDDEN), ("sum_all", HIDDEN)])
    def test_each_table_7_row_has_its_width(self, choice, width):
        self.assertLen(self.states, 6)  # embeddings + 5 blocks, so "all" and "last four" differ
        combined = np.asarray(combine_hidden_states(self.states, choice))
        self.assertEqual(feature_width(choice, HIDDEN), width)
        self.assertEqual(combined.shape, (5, 12, width))

    def test_each_row_takes_the_layers_the_paper_names(self):
        def combined(choice):
            return np.asarray(combine_hidden_states(self.states, choice))

        self.assertAllEqual(combined("embeddings"), self.states[0])
        self.assertAllEqual(combined("second_to_last"), self.states[4])
        self.assertAllEqual(combined("last"), self.states[5])
        self.assertAllClose(combined("sum_last_four"), sum(self.states[2:6]), rtol=1e-6, atol=0)
        self.assertAllClose(combined("sum_all"), sum(self.states[1:6]), rtol=1e-6, atol=0)
        self.assertAllEqual(combined("concat_last_four"),
                            np.concatenate(self.states[:1:-1], axis=-1))  # last block first

    def test_bad_choices_and_shallow_encoders_are_refused(self):
        three = [np.full((1, 2, 4), float(k)) for k in range(3)]  # embeddings + 2 blocks
        with self.assertRaisesRegex(ValueError, "at least 4 block"):
            combine_hidden_states(three, "concat_last_four")
        self.assertIs(combine_hidden_states(three, "second_to_last"), three[1])
        with self.assertRaisesRegex(ValueError, "at least 2 block"):
            check_feature_layers("second_to_last", 1)
        check_feature_layers("sum_all", 1)
        with self.assertRaisesRegex(ValueError, "must be one of"):
            feature_width("first", 8)
        self.assertEqual(set(FEATURE_LAYERS), {"embeddings", "second_to_last", "last",
                                               "sum_last_four",
                                               "concat_last_four", "sum_all"})

    def test_write_features_matches_the_encoder(self):
        tmp_path = self.tmp_path()
        path = str(tmp_path / "cache" / "train.npy")
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            write_features(self.encoder, self.arrays, "sum_last_four", path, batch_size=2)
        self.assertEqual(os.listdir(tmp_path / "cache"), ["train.npy"])  # no partial file left
        count = len(self.arrays["input_ids"])
        self.assertIn(f"{count}/{count}", shown.getvalue())  # the pass shows its progress
        written = np.load(path)
        self.assertEqual(written.dtype, np.float32)
        self.assertAllClose(written, sum(self.states[2:6]), rtol=1e-5, atol=1e-5)
        with self.assertRaisesRegex(ValueError, "output_hidden_states"):
            write_features(BertEncoder(self.encoder.config), self.arrays, "last", path, 2)

    def test_one_pass_writes_other_choices_and_later_runs_reuse_them(self):
        folder, checkpoint = self.tmp_path(), self.tmp_path()
        (checkpoint / "weights").write_text("stand-in")
        built = []

        def build():
            built.append(1)
            return self.encoder

        def cached(choice, also=()):
            return cached_features(build, str(checkpoint), {"config": "tiny"},
                                   {"train": self.arrays}, choice, str(folder), 2, also)

        first = cached("last", ["concat_last_four", "embeddings"])
        self.assertAllClose(first["train"], self.states[5], rtol=1e-5, atol=1e-5)
        self.assertEqual(sorted(name.split("-")[1] for name in os.listdir(folder)),
                         ["concat_last_four", "embeddings", "last"])
        concat = cached("concat_last_four")
        self.assertAllClose(concat["train"], np.concatenate(self.states[:1:-1], axis=-1),
                            rtol=1e-5, atol=1e-5)
        self.assertLen(built, 1)  # the second choice came from the first pass
        cached("second_to_last")
        self.assertLen(built, 2)
        self.assertEqual(feature_layers_for(2), ["embeddings", "second_to_last", "last",
                                                 "sum_all"])
        self.assertEqual(feature_layers_for(4), list(FEATURE_LAYERS))

    def test_padding_does_not_reach_real_positions(self):
        keras.utils.set_random_seed(1)
        tagger = FeatureTagger(num_labels=3, lstm_units=4, dropout=0.0)
        mask = np.array([[1, 1, 1, 0, 0]], np.int32)
        features = np.random.default_rng(0).normal(size=(1, 5, 6)).astype(np.float32)
        noisy = features.copy()
        noisy[:, 3:] = 100.0
        clean = np.asarray(tagger({"features": features, "input_mask": mask}))
        dirty = np.asarray(tagger({"features": noisy, "input_mask": mask}))
        self.assertEqual(clean.shape, (1, 5, 3))
        self.assertAllClose(clean[:, :3], dirty[:, :3], rtol=1e-5, atol=1e-6)

    def test_loss_ignores_unlabelled_positions(self):
        tagger = FeatureTagger(num_labels=2, lstm_units=2)
        logits = np.array([[[0.0, 3.0], [5.0, -5.0], [9.0, 0.0]]], np.float32)
        labels = np.array([[1, -1, 0]], np.int32)
        expected = np.mean([np.log1p(np.exp(-3.0)), np.log1p(np.exp(-9.0))])
        self.assertAllClose(float(tagger.compute_loss(y=labels, y_pred=logits)),
                            expected, rtol=1e-5, atol=0)

    def test_fit_stops_at_a_non_finite_step_keeping_the_weights_from_before_it(self):
        keras.utils.set_random_seed(2)
        features = np.random.default_rng(0).normal(size=(8, 5, 6)).astype(np.float32)
        features[5, 2, 1] = np.nan  # the third batch of two
        batches = FeatureBatches(features, np.ones((8, 5), np.int32),
                                 np.zeros((8, 5), np.int32), batch_size=2)
        tagger = FeatureTagger(num_labels=3, lstm_units=4, dropout=0.0)
        tagger.compile(optimizer=keras.optimizers.Adam(0.01))
        tagger.fit(FeatureBatches(features[:4], np.ones((4, 5), np.int32),
                                  np.zeros((4, 5), np.int32), batch_size=2), verbose=0)
        before = [weight.numpy().copy() for weight in tagger.weights]
        tagger.optimizer.iterations.assign(0)
        with self.assertRaisesRegex(FitDiverged, r"^fit stopped at step 3 .*loss=nan") as caught:
            tagger.fit(batches, epochs=2, verbose=0)
        self.assertEqual(caught.exception.step, 3)
        self.assertEqual(int(tagger.optimizer.iterations.numpy()), 2)  # steps 1 and 2 applied
        for weight in tagger.weights:
            self.assertTrue(np.isfinite(weight.numpy()).all(), weight.path)
        self.assertNotAllClose(tagger.weights[0].numpy(), before[0])

    def test_batches_cover_every_row_reshuffled_each_epoch_or_in_order(self):
        features = np.arange(20 * 3 * 2, dtype=np.float32).reshape(20, 3, 2)
        mask = np.ones((20, 3), np.int32)
        labels = np.arange(20 * 3, dtype=np.int32).reshape(20, 3)
        training = FeatureBatches(features, mask, labels, batch_size=8, seed=0)
        self.assertLen(training, 3)

        def epoch():
            batches = [training[index] for index in range(len(training))]
            for inputs, batch_labels in batches:  # rows stay aligned across the three self.arrays
                self.assertAllEqual(inputs["features"][:, :, 0] // 2, batch_labels)
            return np.concatenate([batch_labels[:, 0] // 3 for _, batch_labels in batches])

        first = epoch()
        training.on_epoch_end()
        second = epoch()
        self.assertTrue(sorted(first) == sorted(second) == list(range(20)))
        self.assertFalse(np.array_equal(first, second))
        ordered = FeatureBatches(features, mask, batch_size=8)
        self.assertLen(ordered[2], 1)  # inputs only, for predict
        self.assertAllEqual(np.concatenate([ordered[index][0]["features"] for index in range(3)]),
                            features)


if __name__ == "__main__":
    tf.test.main()
