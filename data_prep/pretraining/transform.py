"""The per-chunk transform: a chunk's lines -> its serialized pre-training records, writing nothing.

Both pipelines are this transform mapped over the corpus' chunks
(`shards.index_corpus`): the local tool in its worker processes, which
stage what it yields into shard files, and the Beam pipeline as a FlatMap
feeding Beam's TFRecord sink. Its output depends only on the chunk's lines,
its index, the settings and the vocabulary: each chunk draws from generators
seeded by (`random_seed`, chunk index), so the records are the same whoever
runs it, in whatever order or process.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from typing import Iterator, Sequence

import numpy as np
import tensorflow as tf

from core.record_schema import pretraining_record_schema
from data_prep.pretraining.instances import VocabIds, build_features, chunk_bounds, segment_spans
from data_prep.pretraining.records import serialize_examples
from data_prep.pretraining.settings import Settings
from text.tokenization import PACKING_TOKENS, PRETRAINING_TOKENS, FullTokenizer

_BATCH = 2048  # instances padded, masked and encoded together


@dataclasses.dataclass(frozen=True)
class PretrainingTokenizer:
    """The WordPiece tokenizer with the special token IDs the instances need."""

    tokenizer: FullTokenizer
    vocab: VocabIds


@dataclasses.dataclass(frozen=True)
class ChunkRecords:
    """One chunk's statistics, known up front, and its records, produced as they are read.

    `batches` yields lists of serialized `tf.train.Example`s, all the
    chunk's instances in order, a batch at a time: masking and encoding run
    while the consumer reads, so a chunk's records need not all be in memory
    at once. It can be read once.
    """

    index: int
    documents: int
    empty_documents: int
    instances: int
    batches: Iterator[list[bytes]]
    long_lines: int = 0  # lines over `InstanceOptions.long_line_tokens` tokens


@functools.lru_cache(maxsize=8)
def load_tokenizer(vocab_file: str, do_lower_case: bool,
                   needs_mask: bool = True) -> PretrainingTokenizer:
    """Built once per process and vocabulary: building reads the vocabulary and traces graphs.

    [MASK] is required only by settings that insert it (`InstanceOptions.inserts_mask`):
    unmasked data for the left-to-right model can come from any vocabulary.
    """
    required = PRETRAINING_TOKENS if needs_mask else PACKING_TOKENS
    tokenizer = FullTokenizer(vocab_file, do_lower_case, required_tokens=required)
    tokens = [tokenizer.inv_vocab[i] for i in range(tokenizer.vocab_size)]
    return PretrainingTokenizer(tokenizer, VocabIds.from_tokens(tokens))


def chunk_records(index: int, lines: Sequence[str], document_starts: Sequence[int],
                  settings: Settings, tokenizer: PretrainingTokenizer) -> ChunkRecords:
    """The records of chunk `index`: its stripped non-blank `lines`, documents starting at
    `document_starts` (as `shards.read_chunk_lines` returns them).

    Tokenization and the choice of every instance's segments happen here;
    masking and serialization happen batch by batch as `batches` is read.
    """
    token_ids, _ = tokenizer.tokenizer.tokenize_batch(tf.constant(lines, dtype=tf.string))
    row_splits = token_ids.row_splits.numpy()
    document_bounds, sentence_bounds, empty = chunk_bounds(row_splits, document_starts)
    long_lines = int(np.sum(np.diff(row_splits) > settings.options.long_line_tokens))
    span_seed, mask_seed = np.random.SeedSequence([settings.random_seed, index]).spawn(2)
    spans = segment_spans(document_bounds, sentence_bounds, settings.options,
                          random.Random(int(span_seed.generate_state(1, np.uint64)[0])))
    batches = _serialized_batches(token_ids.flat_values.numpy(), spans, settings,
                                  tokenizer.vocab, np.random.default_rng(mask_seed))
    return ChunkRecords(index, len(document_starts), empty, len(spans), batches, long_lines)


def _serialized_batches(flat_ids: np.ndarray, spans: np.ndarray, settings: Settings,
                        vocab: VocabIds, mask_rng: np.random.Generator) -> Iterator[list[bytes]]:
    options = settings.options
    schema = pretraining_record_schema(options.max_seq_length, options.max_predictions_per_seq)
    for start in range(0, len(spans), _BATCH):
        features = build_features(flat_ids, spans[start:start + _BATCH], options, vocab,
                                  mask_rng)
        yield serialize_examples(features, schema)
