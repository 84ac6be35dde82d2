"""The instance algorithm on crafted corpora: pairs, put-back, truncation, masking, encoding."""

import collections
import dataclasses
import random

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.arguments import FieldError
from core.record_schema import RecordFeature, pretraining_record_schema
from data_prep.pretraining.instances import (
    InstanceOptions,
    VocabIds,
    _truncated,
    build_features,
    chunk_bounds,
    segment_spans,
)
from data_prep.pretraining.records import serialize_examples
from text.sentence_pairs import pack_ids
from training.input_pipeline import pretraining_feature_spec

# A toy vocabulary: specials, then words; ids >= 150 are "##" continuation pieces.
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(145)] + [
    f"##p{i}" for i in range(50)]
VOCAB = VocabIds.from_tokens(TOKENS)
SPECIALS = {VOCAB.cls_id, VOCAB.sep_id}


def one_token_sentences(document_lengths):
    """Documents of one-token sentences; token ids are 5, 6, 7, ... so every token is unique."""
    document_bounds = np.cumsum([0] + list(document_lengths)).tolist()
    sentence_bounds = list(range(document_bounds[-1] + 1))
    return document_bounds, sentence_bounds


def document_of(token, document_bounds):
    return int(np.searchsorted(document_bounds, token, side="right")) - 1


def features_for(options, sentences_per_document=(14, 9, 20, 3, 11), continuation_share=0.0,
                 seed=0):
    """Features of a corpus of 3-token sentences with random word ids (some "##" pieces)."""
    document_bounds = np.cumsum([0, *sentences_per_document]).tolist()
    sentence_bounds = list(range(0, 3 * document_bounds[-1] + 1, 3))
    rng = np.random.default_rng(seed)
    size = sentence_bounds[-1]
    token_ids = np.where(rng.random(size) < continuation_share, rng.integers(150, 200, size),
                         rng.integers(5, 150, size))
    spans = segment_spans(document_bounds, sentence_bounds, options, random.Random(seed))
    return token_ids, spans, build_features(token_ids, spans, options, VOCAB, rng)


def original_tokens(token_ids, span, options):
    a_start, a_stop, b_start, b_stop, _ = span
    tokens = [VOCAB.cls_id, *token_ids[a_start:a_stop], VOCAB.sep_id]
    if options.next_sentence:
        tokens += [*token_ids[b_start:b_stop], VOCAB.sep_id]
    return tokens


class PretrainingInstancesTest(tf.test.TestCase, parameterized.TestCase):

    def test_pairs_cover_every_document_once_per_pass_thanks_to_put_back(self):
        lengths = [1, 2, 5, 13, 30, 60] * 4
        document_bounds, sentence_bounds = one_token_sentences(lengths)
        options = InstanceOptions(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=1,
                                  short_seq_prob=0.2)
        spans = segment_spans(document_bounds, sentence_bounds, options, random.Random(3))
        covered = collections.Counter()
        for a_start, a_stop, b_start, b_stop, label in spans.tolist():
            self.assertLessEqual(1, a_stop - a_start)
            self.assertLessEqual(1, b_stop - b_start)
            self.assertLessEqual(a_stop - a_start + b_stop - b_start, options.max_num_tokens)
            document = document_of(a_start, document_bounds)
            self.assertEqual(document_of(a_stop - 1, document_bounds), document)
            self.assertEqual(document_of(b_start, document_bounds),
                             document_of(b_stop - 1, document_bounds))
            covered.update(range(a_start, a_stop))
            if label == 0:
                self.assertEqual(b_start, a_stop)  # B continues A
                covered.update(range(b_start, b_stop))
            else:
                self.assertNotEqual(document_of(b_start, document_bounds), document)
        # Without putting back the sentences after A, random-next pairs would skip them.
        self.assertEqual(covered, collections.Counter(range(document_bounds[-1])))
        self.assertTrue(0.4 < spans[:, 4].mean() < 0.7)

    def test_dupe_passes_and_shuffle_are_seeded(self):
        document_bounds, sentence_bounds = one_token_sentences([20, 30, 40])
        options = InstanceOptions(max_seq_length=12, max_predictions_per_seq=2, dupe_factor=3)
        first = segment_spans(document_bounds, sentence_bounds, options, random.Random(7))
        again = segment_spans(document_bounds, sentence_bounds, options, random.Random(7))
        once = segment_spans(document_bounds, sentence_bounds,
                             dataclasses.replace(options, dupe_factor=1), random.Random(7))
        self.assertAllEqual(first, again)
        self.assertLessEqual(abs(len(first) - 3 * len(once)), 0.2 * len(first))
        self.assertFalse(np.array_equal(first[:, 0], np.sort(first[:, 0])))  # shuffled

    def test_short_seq_prob_shortens_targets(self):
        document_bounds, sentence_bounds = one_token_sentences([100] * 50)

        def mean_length(short_seq_prob):
            options = InstanceOptions(max_seq_length=67, dupe_factor=2,
                                      short_seq_prob=short_seq_prob)
            spans = segment_spans(document_bounds, sentence_bounds, options, random.Random(1))
            return np.mean(spans[:, 1] - spans[:, 0] + spans[:, 3] - spans[:, 2])

        # One target per document and pass; a short target makes more, shorter instances.
        self.assertTrue(mean_length(1.0) < 0.6 * mean_length(0.1) < 0.6 * 0.9 * mean_length(0.0))

    @parameterized.parameters([
        (10, 3, 8), (3, 10, 8), (7, 7, 9), (7, 6, 4), (50, 49, 13), (5, 5, 10), (1, 40, 2)])
    def test_truncation_matches_the_original_loop(self, a_length, b_length, max_tokens):
        a, b = list(range(a_length)), list(range(100, 100 + b_length))
        while len(a) + len(b) > max_tokens:  # the original's loop, lengths only
            (a if len(a) > len(b) else b).pop()
        fronts = []
        for seed in range(300):
            a_start, a_stop, b_start, b_stop, _ = _truncated(0, a_length, 100, 100 + b_length, 0,
                                                             max_tokens, random.Random(seed))
            self.assertEqual((a_stop - a_start, b_stop - b_start), (len(a), len(b)))
            fronts.append(a_start + b_start - 100)
        cuts = a_length + b_length - len(a) - len(b)
        self.assertLessEqual(abs(np.mean(fronts) - cuts / 2),
                             0.15 * cuts + 0.1)  # each cut front or back by a coin

    def test_features_layout_and_masking_invariants(self):
        options = InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=4)
        token_ids, spans, features = features_for(options)
        self.assertEqual(set(features), set(pretraining_feature_spec(32, 5)))
        for row, span in enumerate(spans.tolist()):
            tokens = original_tokens(token_ids, span, options)
            length, a_length = len(tokens), span[1] - span[0]
            ids = features["input_ids"][row]
            self.assertEqual(ids[0], VOCAB.cls_id)
            self.assertTrue(ids[a_length + 1] == ids[length - 1] == VOCAB.sep_id)
            self.assertTrue((ids[length:] == 0).all())
            self.assertEqual(features["input_mask"][row].tolist(),
                             [1] * length + [0] * (32 - length))
            self.assertEqual(features["segment_ids"][row].tolist(),
                             [0] * (a_length + 2) + [1] * (length - a_length - 2) + [0] * (32 - length))
            used = int(features["masked_lm_weights"][row].sum())
            self.assertEqual(used, min(5, max(1, round(length * 0.15))))
            positions = features["masked_lm_positions"][row][:used]
            self.assertTrue((np.diff(positions) > 0).all())
            self.assertTrue((features["masked_lm_positions"][row][used:] == 0).all())
            self.assertFalse({tokens[p] for p in positions} & SPECIALS)
            self.assertEqual(features["masked_lm_ids"][row][:used].tolist(),
                             [tokens[p] for p in positions])
            self.assertTrue((features["masked_lm_ids"][row][used:] == 0).all())
            restored = ids[:length].copy()
            restored[positions] = features["masked_lm_ids"][row][:used]
            self.assertEqual(restored.tolist(),
                             tokens)  # unmasked positions are the original tokens
            self.assertEqual(features["next_sentence_labels"][row].tolist(), [span[4]])

    @parameterized.parameters([((1, 0, 0), "mask"), ((0, 0, 1), "same"),
                                                 ((0.8, 0.1, 0.1), "mix")])
    def test_mask_ratios(self, ratios, expected):
        options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=30,
                                  mask_ratios=ratios)
        _, _, features = features_for(options, (140, 90, 200, 30, 110))
        used = features["masked_lm_weights"] > 0
        at_positions = np.take_along_axis(features["input_ids"], features["masked_lm_positions"], 1)
        is_mask = (at_positions == VOCAB.mask_id)[used]
        is_same = (at_positions == features["masked_lm_ids"])[used]
        if expected == "mask":
            self.assertTrue(is_mask.all())
        elif expected == "same":
            self.assertTrue(is_same.all())
        else:
            self.assertGreater(used.sum(), 5000)
            self.assertLess(abs(is_mask.mean() - 0.8), 0.02)
            self.assertLess(abs(is_same.mean() - 0.1),
                            0.02)  # a random token rarely equals the original
            self.assertLess(abs((~is_mask & ~is_same).mean() - 0.1), 0.02)

    def test_no_nsp_gives_one_contiguous_segment(self):
        options = InstanceOptions(max_seq_length=24, dupe_factor=3, next_sentence=False)
        token_ids, spans, features = features_for(options)
        self.assertTrue((spans[:, 2] == spans[:, 3]).all())
        self.assertTrue((spans[:, 4] == 0).all())
        self.assertFalse(features["segment_ids"].any())
        self.assertFalse(features["next_sentence_labels"].any())
        lengths = features["input_mask"].sum(axis=1)
        self.assertEqual(lengths.max(), 24)
        self.assertTrue(((features["input_ids"] == VOCAB.sep_id).sum(axis=1) == 1).all())
        for row, span in enumerate(spans.tolist()):
            self.assertEqual(features["input_ids"][row][lengths[row] - 1], VOCAB.sep_id)

    def test_masked_lm_prob_zero_leaves_sequences_unmasked(self):
        options = InstanceOptions(max_seq_length=24, dupe_factor=2, masked_lm_prob=0.0)
        token_ids, spans, features = features_for(options)
        for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
            self.assertFalse(features[name].any())
        for row, span in enumerate(spans.tolist()):
            tokens = original_tokens(token_ids, span, options)
            self.assertEqual(features["input_ids"][row][:len(tokens)].tolist(), tokens)

    @parameterized.parameters(True, False)
    def test_unmasked_features_are_the_fine_tuning_layout(self, next_sentence):
        """Pre-training and fine-tuning inputs share one layout: segments that fit pack alike."""
        options = InstanceOptions(max_seq_length=24, dupe_factor=2, masked_lm_prob=0.0,
                                  next_sentence=next_sentence)
        token_ids, spans, features = features_for(options)
        firsts = [token_ids[a_start:a_stop].tolist() for a_start, a_stop, *_ in spans.tolist()]
        seconds = [token_ids[b_start:b_stop].tolist() if next_sentence else None
                   for _, _, b_start, b_stop, _ in spans.tolist()]
        packed = pack_ids(firsts, seconds, 24, VOCAB.cls_id, VOCAB.sep_id)
        for name in ("input_ids", "input_mask", "segment_ids"):
            self.assertAllEqual(features[name].astype(np.int32), packed[name], msg=name)

    def test_whole_word_masking_never_splits_a_word(self):
        options = InstanceOptions(max_seq_length=40, max_predictions_per_seq=8, dupe_factor=20,
                                  do_whole_word_mask=True)
        token_ids, spans, features = features_for(options, continuation_share=0.4)
        multi_piece = 0
        for row, span in enumerate(spans.tolist()):
            tokens = original_tokens(token_ids, span, options)
            used = int(features["masked_lm_weights"][row].sum())
            self.assertLessEqual(used,
                                 min(8, max(1,
                                            round(len(tokens) * 0.15))))  # 0 if every word is too long
            masked = set(features["masked_lm_positions"][row][:used].tolist())
            for position in range(1, len(tokens)):
                continues = (VOCAB.continues_word[tokens[position]]
                             and tokens[position - 1] not in SPECIALS)
                if continues and (position in masked) != (position - 1 in masked):
                    self.fail(f"row {row} splits the word at {position}: {tokens}, {sorted(masked)}")
                multi_piece += continues and position in masked
        self.assertGreater(multi_piece, 50)

    def test_chunk_bounds_drop_lines_and_documents_without_tokens(self):
        row_splits = np.cumsum([0, 3, 0, 2, 0, 4])
        document_bounds, sentence_bounds, empty = chunk_bounds(row_splits, [0, 3, 4])
        self.assertEqual((document_bounds, sentence_bounds, empty), ([0, 2, 3], [0, 3, 5, 9], 1))

    def test_options_reject_bad_values(self):
        for bad, message in [({"max_predictions_per_seq": 200},
                              r"^max_predictions_per_seq=200 must lie in \[0, max_seq_length=128\]"),
                             ({"max_seq_length": 4}, "^max_seq_length=4"),
                             ({"mask_ratios": (0.8, 0.1, 0.2)}, "^mask_ratios=0.8,0.1,0.2"),
                             ({"masked_lm_prob": 1.5}, "^masked_lm_prob=1.5"),
                             ({"dupe_factor": 0}, "^dupe_factor=0")]:
            with self.assertRaises(FieldError) as raised:
                InstanceOptions(**bad)
            self.assertRegex(str(raised.exception), message)
            field = message.removeprefix("^").partition("=")[0]
            self.assertIn(f"--{field}=", raised.exception.render({field}))

    def test_serialized_records_parse_with_the_pretraining_schema(self):
        options = InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
        _, _, features = features_for(options)
        records = serialize_examples(features, pretraining_record_schema(32, 5))
        spec = pretraining_feature_spec(32, 5)  # the reader's
        for row in (0, len(records) // 2, len(records) - 1):
            parsed = tf.io.parse_single_example(records[row], spec)
            for name, value in parsed.items():
                self.assertAllEqual(value.numpy(), features[name][row])
            example = tf.train.Example.FromString(records[row])
            self.assertEqual(example.features.feature["masked_lm_weights"].WhichOneof("kind"),
                             "float_list")

    def test_encoding_equals_protobuf_for_wide_and_empty_values(self):
        values = {"big": np.array([[0, 127, 128, 2**14, 2**35 + 3], [1, 2, 3, 4, 2**62]]),
                  "flag": np.array([[True], [False]]), "none": np.zeros((2, 0), dtype=np.int64),
                  "weights": np.array([[0.5, -1.25], [3.0, 0.0]], dtype=np.float32)}
        schema = {"big": RecordFeature("int64", 5), "flag": RecordFeature("int64", 1),
                  "none": RecordFeature("int64", 0), "weights": RecordFeature("float32", 2)}
        for row, record in enumerate(serialize_examples(values, schema)):
            def ints(name):
                return tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[int(value) for value in values[name][row]]))

            expected = tf.train.Example(features=tf.train.Features(feature={
                "big": ints("big"), "flag": ints("flag"), "none": ints("none"),
                "weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=values["weights"][row]))}))
            self.assertEqual(tf.train.Example.FromString(record), expected)
        with self.assertRaisesRegex(ValueError, "non-negative"):
            serialize_examples({"bad": np.array([[-1]])}, {"bad": RecordFeature("int64", 1)})

    def test_encoding_refuses_what_the_schema_does_not_declare(self):
        schema = {"ids": RecordFeature("int64", 3), "weights": RecordFeature("float32", 2)}
        ids, weights = np.zeros((4, 3), np.int64), np.zeros((4, 2), np.float32)
        for features, message in [
                ({"ids": ids}, "^features must be those of the schema \\(ids, weights\\); "
                               "missing: weights, not in the schema: none$"),
                ({"ids": ids, "weights": weights, "extra": ids},
                 "missing: none, not in the schema: extra$"),
                ({"ids": ids[:, :2], "weights": weights},
                 "^feature 'ids' must be \\[N, 3\\], got \\(4, 2\\)$"),
                ({"ids": ids, "weights": weights[:3]},
                 "^feature 'weights' must be \\[4, 2\\], got \\(3, 2\\)$"),
                ({"ids": ids.astype(np.float32), "weights": weights},
                 "^feature 'ids' is int64 in the schema, got float32 values$"),
                ({"ids": ids, "weights": weights.astype(np.int64)},
                 "^feature 'weights' is float32 in the schema, got int64 values$")]:
            with self.assertRaisesRegex(ValueError, message):
                serialize_examples(features, schema)


if __name__ == "__main__":
    tf.test.main()
