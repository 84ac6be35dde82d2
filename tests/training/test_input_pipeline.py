"""training.input_pipeline on records written the way the original tools write them."""

import re
import struct

import tensorflow as tf
from absl.testing import parameterized

from tests.fixtures import TestCase
from training.input_pipeline import (CorruptRecordError, check_record_file, list_files,
                                     naming_corrupt_records, naming_out_of_vocabulary_ids,
                                     parse_fixed_features, pretraining_dataset,
                                     pretraining_feature_spec)

SEQ, PREDS = 16, 4


def make_example(record_id: int, seq: int = SEQ, preds: int = PREDS,
                 drop: str | None = None) -> tf.train.Example:
    """A pre-training Example whose input_ids[0] holds `record_id`, to track records."""
    ints = lambda values: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    floats = lambda values: tf.train.Feature(float_list=tf.train.FloatList(value=values))
    ids = [record_id] + [(record_id + i) % 50 for i in range(1, seq)]
    features = {
        "input_ids": ints(ids), "input_mask": ints([1] * seq), "segment_ids": ints([0] * seq),
        "masked_lm_positions": ints(range(1, preds + 1)),
        "masked_lm_ids": ints(ids[1:preds + 1]),
        "masked_lm_weights": floats([1.0] * preds),
        "next_sentence_labels": ints([record_id % 2]),
    }
    features.pop(drop, None)
    return tf.train.Example(features=tf.train.Features(feature=features))


def write_files(folder, num_files: int, per_file: int, **kwargs) -> list[int]:
    """Writes num_files files; returns all record ids (file f holds f*100 + i)."""
    ids = []
    for file_index in range(num_files):
        with tf.io.TFRecordWriter(str(folder / f"part-{file_index}.tfrecord")) as writer:
            for i in range(per_file):
                ids.append(file_index * 100 + i)
                writer.write(make_example(ids[-1], **kwargs).SerializeToString())
    return ids


def record_offsets(data: bytes) -> list[int]:
    """Where each record of a TFRecord file's bytes starts (header: 8-byte length, 4-byte CRC)."""
    offsets, offset = [], 0
    while offset < len(data):
        offsets.append(offset)
        offset += 16 + struct.unpack_from("<Q", data, offset)[0]
    return offsets


def record_ids(dataset, batches=None) -> list[int]:
    dataset = dataset if batches is None else dataset.take(batches)
    return [int(i) for batch in dataset for i in batch["input_ids"][:, 0]]


class InputPipelineTest(TestCase, parameterized.TestCase):

    def test_ids_checked_against_the_vocabulary_pass_unchanged_or_stop_with_the_records_named(
            self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 6)  # ids up to 5 + SEQ - 1 = 20
        pattern = str(tmp_path / "*.tfrecord")
        plain = list(pretraining_dataset(pattern, 3, SEQ, PREDS, is_training=False))
        checked = list(pretraining_dataset(pattern, 3, SEQ, PREDS, is_training=False,
                                           vocab_size=50))
        for want, got in zip(plain, checked, strict=True):
            for name in want:
                self.assertAllEqual(got[name].numpy(), want[name].numpy())
        with self.assertRaisesRegex(ValueError,
                                    rf"^{re.escape(pattern)}: a record holds token id 20, "
                                    r"outside the vocabulary of cfg.json \(vocab_size=18\)"):
            with naming_out_of_vocabulary_ids(pattern, 18, "cfg.json"):
                list(pretraining_dataset(pattern, 6, SEQ, PREDS, is_training=False,
                                         vocab_size=18))
        # Other errors pass through as they were.
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "unrelated"):
            with naming_out_of_vocabulary_ids(pattern, 18, "cfg.json"):
                tf.debugging.Assert(False, ["unrelated"])

    def test_reads_back_with_static_shapes_and_int32(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 6)
        dataset = pretraining_dataset(str(tmp_path / "*.tfrecord"), 3, SEQ, PREDS,
                                      is_training=False)
        spec = dataset.element_spec
        self.assertEqual({key: (tuple(value.shape), value.dtype) for key, value in spec.items()}, {
            "input_ids": ((3, SEQ), tf.int32), "input_mask": ((3, SEQ), tf.int32),
            "segment_ids": ((3, SEQ), tf.int32), "masked_lm_positions": ((3, PREDS), tf.int32),
            "masked_lm_ids": ((3, PREDS), tf.int32),
            "masked_lm_weights": ((3, PREDS), tf.float32),
            "next_sentence_labels": ((3, 1), tf.int32)})
        batches = list(dataset)
        self.assertLen(batches, 2)
        first = batches[0]
        self.assertAllEqual(first["input_ids"][1], [1] + list(range(2, SEQ + 1)))
        self.assertAllEqual(first["masked_lm_positions"][0], [1, 2, 3, 4])
        self.assertAllEqual(first["next_sentence_labels"][:, 0], [0, 1, 0])

    def test_training_repeats_shuffles_and_is_reproducible_with_a_seed(self):
        tmp_path = self.tmp_path()
        ids = write_files(tmp_path, 3, 5)
        pattern = str(tmp_path / "part-*")

        def read(seed):
            return record_ids(pretraining_dataset(pattern, 5, SEQ, PREDS, True, seed=seed),
                              batches=6)

        first, again, other = read(7), read(7), read(8)
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)
        # 30 records from 15: repeated (the record shuffle mixes across passes).
        self.assertLen(first, 30)
        self.assertContainsSubset(set(first), set(ids))
        self.assertGreater(len(set(first)), 10)

    def test_evaluation_drops_the_last_partial_batch(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 5)
        self.assertLen(record_ids(pretraining_dataset(str(tmp_path / "*"), 4, SEQ, PREDS,
                                                      False)), 8)

    @parameterized.parameters(4, 1)
    def test_two_pipelines_read_disjoint_data(self, num_files):
        """By files when there are enough of them, otherwise by records within each file."""
        tmp_path = self.tmp_path()
        ids = write_files(tmp_path, num_files, 8 // num_files * 2)
        seen = []
        for pipeline in range(2):
            context = tf.distribute.InputContext(num_input_pipelines=2,
                                                 input_pipeline_id=pipeline,
                                                 num_replicas_in_sync=2)
            dataset = pretraining_dataset(str(tmp_path / "*"), 4, SEQ, PREDS, False,
                                          input_context=context)
            # per-replica batch
            self.assertEqual(dataset.element_spec["input_ids"].shape, (2, SEQ))
            seen.append(record_ids(dataset))
        self.assertEmpty(set(seen[0]) & set(seen[1]))
        self.assertEqual(sorted(seen[0] + seen[1]), sorted(ids))
        if num_files == 4:
            self.assertTrue({i // 100 for i in seen[0]}.isdisjoint({i // 100 for i in seen[1]}))

    def test_missing_files_name_the_pattern(self):
        pattern = str(self.tmp_path() / "nothing-*.tfrecord")
        with self.assertRaisesRegex(FileNotFoundError, "nothing-"):
            pretraining_dataset(pattern, 2, SEQ, PREDS, True)

    def test_comma_separated_patterns(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 2)
        pattern = f"{tmp_path / 'part-0.tfrecord'}, {tmp_path / 'part-1.tfrecord'}"
        self.assertEqual(sorted(record_ids(pretraining_dataset(pattern, 1, SEQ, PREDS, False))),
                         [0, 1, 100, 101])

    def test_records_lacking_a_feature_give_a_clear_error(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 2, drop="masked_lm_weights")
        with self.assertRaisesRegex(ValueError,
                                    r"part-0.tfrecord.*lacks feature 'masked_lm_weights'"):
            pretraining_dataset(str(tmp_path / "*"), 2, SEQ, PREDS, True)

    def test_wrong_max_seq_length_gives_a_clear_error(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 2)
        with self.assertRaisesRegex(ValueError, r"'input_ids' has length 16, expected 32.*"
                                                r"\(check max_seq_length and "
                                                r"max_predictions_per_seq against the data\)$"):
            pretraining_dataset(str(tmp_path / "*"), 2, 32, PREDS, True)

    def test_parse_fixed_features_on_one_record_or_a_batch(self):
        spec = pretraining_feature_spec(SEQ, PREDS)
        serialized = [make_example(i).SerializeToString() for i in (3, 4)]
        one = parse_fixed_features(tf.constant(serialized[0]), spec)
        self.assertEqual(one["input_ids"].shape, (SEQ,))
        self.assertEqual(one["input_ids"].dtype, tf.int32)
        batch = parse_fixed_features(tf.constant(serialized), {"next_sentence_labels":
                                                               spec["next_sentence_labels"]})
        self.assertAllEqual(batch["next_sentence_labels"], [[1], [0]])

    def test_a_folder_glob_skips_hidden_completion_markers(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 3)
        (tmp_path / ".part-0.tfrecord.complete.json").write_text('{"instances": 3}')
        dataset = pretraining_dataset(str(tmp_path / "*"), 3, SEQ, PREDS, is_training=False)
        self.assertEqual(sorted(record_ids(dataset)), [0, 1, 2, 100, 101, 102])
        self.assertEqual(list_files(str(tmp_path / ".part-0*")), [
            str(tmp_path / ".part-0.tfrecord.complete.json")])  # named on purpose: kept

    def test_a_folder_matched_by_the_glob_is_named(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 3)
        (tmp_path / "logs").mkdir()
        with self.assertRaisesRegex(IsADirectoryError,
                                    f"{tmp_path}/logs: a folder where record files"):
            pretraining_dataset(str(tmp_path / "*"), 3, SEQ, PREDS, is_training=False)

    def test_a_text_file_given_as_records_is_named(self):
        tmp_path = self.tmp_path()
        (tmp_path / "corpus.txt").write_text("A sentence of plain text.\nAnother one.\n")
        with self.assertRaisesRegex(CorruptRecordError, r"corpus.txt: not a TFRecord file "
                                                        r"\(no record header at byte 0\)"):
            pretraining_dataset(str(tmp_path / "corpus.txt"), 2, SEQ, PREDS, is_training=True)

    @parameterized.parameters(5, 20)  # inside the header, inside the payload
    def test_a_truncated_file_is_named_with_the_record_offset(self, cut):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 4)
        path = tmp_path / "part-1.tfrecord"
        data = path.read_bytes()
        last = record_offsets(data)[3]
        path.write_bytes(data[:last + cut])
        with self.assertRaisesRegex(CorruptRecordError,
                                    f"part-1.tfrecord: truncated record at byte {last}"):
            pretraining_dataset(str(tmp_path / "*.tfrecord"), 2, SEQ, PREDS, is_training=True)
        self.assertEqual(check_record_file(str(tmp_path / "part-0.tfrecord")), 4)

    def test_a_damaged_payload_found_while_reading_names_file_and_offset(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 1, 4)
        path = tmp_path / "part-0.tfrecord"
        data = bytearray(path.read_bytes())
        third = record_offsets(bytes(data))[2]
        data[third + 20] ^= 0xFF  # framing intact: only the payload checksum fails
        path.write_bytes(bytes(data))
        dataset = pretraining_dataset(str(path), 4, SEQ, PREDS, is_training=False)
        with self.assertRaisesRegex(CorruptRecordError, f"part-0.tfrecord: corrupted record at "
                                                        f"byte {third} .*corrupted record at"):
            with naming_corrupt_records(str(path)):
                list(dataset)


if __name__ == "__main__":
    tf.test.main()
