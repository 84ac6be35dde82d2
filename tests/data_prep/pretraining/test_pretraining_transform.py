"""The per-chunk transform: pure (writes nothing, same records every call) and what the shards hold."""

import contextlib
import io
import os

import tensorflow as tf

from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining import transform
from data_prep.pretraining.local import create_pretraining_data
from tests.data_prep.synthetic_corpus import make_corpus, settings_for
from tests.fixtures import TestCase


def _all_chunk_records(settings):
    """Every chunk's transform output in chunk order, and the chunks' statistics."""
    index = shards_lib.index_corpus(shards_lib.expand_inputs(settings.input_patterns),
                                    settings.documents_per_chunk)
    tokenizer = transform.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    records, statistics = [], []
    for chunk_index, chunk in enumerate(index.chunks):
        lines, document_starts = shards_lib.read_chunk_lines(chunk)
        result = transform.chunk_records(chunk_index, lines, document_starts, settings, tokenizer)
        chunk_records = [record for batch in result.batches for record in batch]
        assert len(chunk_records) == result.instances
        records += chunk_records
        statistics.append((result.index, result.documents, result.empty_documents))
    return records, statistics


class PretrainingTransformTest(TestCase):

    def setUp(self):
        super().setUp()
        self.folder = self.tmp_path()
        self.corpus = make_corpus(self.folder)

    def test_transform_writes_nothing_and_repeats_its_records(self):
        tmp_path = self.folder
        self.enter_context(contextlib.chdir(tmp_path))
        before = sorted(os.walk(tmp_path))
        settings = settings_for(self.corpus, tmp_path / "out" / "data.tfrecord")
        first, statistics = _all_chunk_records(settings)
        again, _ = _all_chunk_records(settings)
        self.assertEqual(sorted(os.walk(tmp_path)), before)
        self.assertTrue(first)
        self.assertEqual(first, again)
        self.assertEqual([index for index, _, _ in statistics], list(range(len(statistics))))
        self.assertEqual(sum(documents for _, documents, _ in statistics), 13)
        self.assertEqual(sum(empty for _, _, empty in statistics), 1)
        example = tf.train.Example.FromString(first[0])
        self.assertLen(example.features.feature["input_ids"].int64_list.value, 32)

    def test_one_shard_holds_the_transform_records_in_chunk_order(self):
        tmp_path = self.folder
        settings = settings_for(self.corpus, tmp_path / "out" / "data.tfrecord",
                                num_output_shards=1)
        summary = create_pretraining_data(settings, io.StringIO())
        written = list(tf.data.TFRecordDataset(str(tmp_path / "out" / "data.tfrecord"))
                       .as_numpy_iterator())
        expected, _ = _all_chunk_records(settings)
        self.assertEqual(written, expected)
        self.assertEqual(summary.instances, len(expected))

    def test_other_seed_other_records(self):
        tmp_path = self.folder
        records, _ = _all_chunk_records(settings_for(self.corpus, tmp_path / "x"))
        reseeded, _ = _all_chunk_records(settings_for(self.corpus, tmp_path / "x", random_seed=7))
        self.assertTrue(records)
        self.assertTrue(reseeded)
        self.assertNotEqual(records, reseeded)


if __name__ == "__main__":
    tf.test.main()
