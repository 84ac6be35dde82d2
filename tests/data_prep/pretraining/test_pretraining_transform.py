"""The per-chunk transform: pure (writes nothing, same records every call) and what the shards hold."""

import io
import os

import tensorflow as tf

from data_prep.pretraining import shards as shards_lib
from data_prep.pretraining import transform
from data_prep.pretraining.local import create_pretraining_data
from tests.data_prep.conftest import settings_for


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


def test_transform_writes_nothing_and_repeats_its_records(corpus, tmp_path,  # noqa: F811
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(os.walk(tmp_path))
    settings = settings_for(corpus, tmp_path / "out" / "data.tfrecord")
    first, statistics = _all_chunk_records(settings)
    again, _ = _all_chunk_records(settings)
    assert sorted(os.walk(tmp_path)) == before
    assert first and first == again
    assert [index for index, _, _ in statistics] == list(range(len(statistics)))
    assert sum(documents for _, documents, _ in statistics) == 13
    assert sum(empty for _, _, empty in statistics) == 1
    example = tf.train.Example.FromString(first[0])
    assert len(example.features.feature["input_ids"].int64_list.value) == 32


def test_one_shard_holds_the_transform_records_in_chunk_order(corpus, tmp_path):  # noqa: F811
    settings = settings_for(corpus, tmp_path / "out" / "data.tfrecord", num_output_shards=1)
    summary = create_pretraining_data(settings, io.StringIO())
    written = list(tf.data.TFRecordDataset(str(tmp_path / "out" / "data.tfrecord"))
                   .as_numpy_iterator())
    expected, _ = _all_chunk_records(settings)
    assert written == expected and summary.instances == len(expected)


def test_other_seed_other_records(corpus, tmp_path):  # noqa: F811
    records, _ = _all_chunk_records(settings_for(corpus, tmp_path / "x"))
    reseeded, _ = _all_chunk_records(settings_for(corpus, tmp_path / "x", random_seed=7))
    assert records and reseeded and records != reseeded
