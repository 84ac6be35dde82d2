"""TFRecord files -> tf.data pipelines with static shapes, sharded per worker and replica.

The pre-training records are the original tools' tf.train.Examples (their
schema is `core.record_schema`'s, which the writer in `data_prep` follows
too); `pretraining_dataset` reads them unchanged. Batches keep a fixed
size (`drop_remainder=True`) so every tensor has a static shape, which TPUs
and XLA need. Integer features are stored as int64 (the only integer type a
tf.train.Example holds) and cast to int32, what the model's embedding
lookups and TPUs want.

Before building the pipeline, the first record is checked against the
expected schema in Python: a wrong `max_seq_length` or a missing feature
otherwise only surfaces as an op error deep inside the first training step.
Each file's record framing is walked too (headers only, no payload read),
so a cut-off file or a text file given as records is named, with the byte
offset, before training starts rather than as an unnamed DataLossError
hours into it. Globs skip hidden files (`.name`): the completion markers
that `create_pretraining_data` leaves beside its shards are not records.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import struct
from typing import Iterator, Mapping

import crcmod.predefined  # the CRC-32C that TFRecord framing uses (apache-beam[tfrecord])
import tensorflow as tf

from core.arguments import FieldError
from core.record_schema import pretraining_record_schema

# Records in the shuffle buffer; the original used 100 after interleaving.
_SHUFFLE_BUFFER = 1000
_MAX_PARALLEL_FILES = 8


def pretraining_feature_spec(max_seq_length: int,
                             max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """The features the original `create_pretraining_data.py` writes, with their shapes."""
    return {name: tf.io.FixedLenFeature([feature.length], tf.as_dtype(feature.dtype))
            for name, feature in pretraining_record_schema(max_seq_length,
                                                           max_predictions_per_seq).items()}


def parse_fixed_features(record: tf.Tensor,
                         spec: Mapping[str, tf.io.FixedLenFeature]) -> dict[str, tf.Tensor]:
    """Parses one serialized Example or a batch of them; int64 features become int32."""
    features = tf.io.parse_example(record, dict(spec))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def check_record_schema(path: str, spec: Mapping[str, tf.io.FixedLenFeature]) -> None:
    """Raises ValueError naming `path` if its first record does not fit `spec`.

    Extra features in the record are allowed (they are not read); missing
    ones, other types and other lengths are not.
    """
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if first is None:
        raise ValueError(f"{path}: the file holds no records")
    try:
        example = tf.train.Example.FromString(first.numpy())
    except Exception as error:  # a protobuf DecodeError; its type is not public
        raise ValueError(f"{path}: the first record is not a tf.train.Example ({error})") from None
    kinds = {tf.int64: "int64_list", tf.float32: "float_list", tf.string: "bytes_list"}
    problems = []
    for name, feature in spec.items():
        if name not in example.features.feature:
            problems.append(f"lacks feature {name!r}")
            continue
        stored = example.features.feature[name]
        kind = stored.WhichOneof("kind")
        expected_kind = kinds[tf.as_dtype(feature.dtype)]
        length = len(getattr(stored, kind).value) if kind else 0
        expected_length = int(tf.TensorShape(feature.shape).num_elements())
        if kind != expected_kind:
            problems.append(f"feature {name!r} is {kind}, expected {expected_kind}")
        elif length != expected_length:
            problems.append(f"feature {name!r} has length {length}, expected {expected_length}")
    if problems:
        raise FieldError("{0}: records do not match the expected schema: {1} (check "
                         "{max_seq_length} and {max_predictions_per_seq} against the data)",
                         path, "; ".join(problems))


def list_files(file_pattern: str) -> list[str]:
    """Files matching a glob, or a comma-separated list of globs, sorted.

    TensorFlow's glob, unlike the shell's, lets `*` match a leading dot;
    hidden files are dropped unless the pattern itself names a hidden file.
    """
    files = []
    for pattern in (part.strip() for part in file_pattern.split(",")):
        if pattern:
            hidden_wanted = os.path.basename(pattern).startswith(".")
            files.extend(path for path in tf.io.gfile.glob(pattern)
                         if hidden_wanted or not os.path.basename(path).startswith("."))
    if not files:
        raise FileNotFoundError(f"no input file matches {file_pattern!r}")
    return sorted(set(files))


class CorruptRecordError(ValueError):
    """A TFRecord file that is cut short, damaged, or not a record file at all."""


_HEADER = struct.Struct("<QI")  # payload length, masked CRC-32C of the length
_FOOTER_BYTES = 4  # masked CRC-32C of the payload
_crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def check_record_file(path: str, verify_payloads: bool = False) -> int:
    """Walks the record framing of `path`; returns its record count.

    Reads each 12-byte header, checks the header's checksum and seeks past
    the payload: a cost per record, not per byte. `verify_payloads` also
    reads every payload and checks its checksum (what TensorFlow's reader
    does), for finding the file behind a DataLossError. Raises
    CorruptRecordError naming `path` and the record's byte offset.
    """
    size = tf.io.gfile.stat(path).length
    records = offset = 0
    with tf.io.gfile.GFile(path, "rb") if "://" in path else open(path, "rb") as reader:
        while offset < size:
            reader.seek(offset)
            header = reader.read(_HEADER.size)
            if len(header) < _HEADER.size:
                raise CorruptRecordError(
                    f"{path}: truncated record at byte {offset}: the file ends inside a "
                    "record header (cut short? write it again)")
            length, header_crc = _HEADER.unpack(header)
            if _masked_crc(header[:8]) != header_crc:
                if offset == 0:
                    raise CorruptRecordError(f"{path}: not a TFRecord file (no record header "
                                             "at byte 0); pass record files, not text")
                raise CorruptRecordError(f"{path}: corrupted record header at byte {offset}")
            end = offset + _HEADER.size + length + _FOOTER_BYTES
            if end > size:
                raise CorruptRecordError(
                    f"{path}: truncated record at byte {offset}: it needs {end - offset} bytes, "
                    f"the file ends after {size - offset} (cut short? write it again)")
            if verify_payloads:
                payload = reader.read(length)
                footer = reader.read(_FOOTER_BYTES)
                if _masked_crc(payload) != struct.unpack("<I", footer)[0]:
                    raise CorruptRecordError(f"{path}: corrupted record at byte {offset} "
                                             "(its checksum does not match)")
            offset = end
            records += 1
    return records


@functools.lru_cache(maxsize=None)
def _checked_record_file(path: str, size: int, modified: int) -> int:
    """`check_record_file`, once per version of a file (each pipeline builder asks again)."""
    del size, modified  # the cache key
    return check_record_file(path)


def check_record_files(files: list[str]) -> None:
    """Raises CorruptRecordError for the first file whose framing is broken (OSError: a folder).

    Files on remote file systems (`gs://...`) are not walked: a request per
    record would cost more than training reads; `naming_corrupt_records`
    still names them if their records turn out damaged.
    """
    for path in files:
        if "://" in path:
            continue
        status = tf.io.gfile.stat(path)
        if status.is_directory:
            raise IsADirectoryError(f"{path}: a folder where record files were expected; "
                                    "match the files inside it (e.g. folder/*.tfrecord)")
        _checked_record_file(path, status.length, status.mtime_nsec)


@contextlib.contextmanager
def naming_corrupt_records(file_pattern: str) -> Iterator[None]:
    """Turns a DataLossError met while reading `file_pattern` into an error naming the file.

    TensorFlow's message gives a byte offset but not the file; a damaged
    payload (its framing intact) only shows when training reads it. The
    files are then checked in full to find which one it is.
    """
    try:
        yield
    except tf.errors.DataLossError as error:
        problems = []
        for path in list_files(file_pattern):
            try:
                check_record_file(path, verify_payloads=True)
            except CorruptRecordError as problem:
                problems.append(str(problem))
        where = "; ".join(problems) or f"a file of {file_pattern!r}"
        raise CorruptRecordError(f"{where} ({error.message})") from None


def record_dataset(file_pattern: str, spec: Mapping[str, tf.io.FixedLenFeature],
                   batch_size: int, is_training: bool,
                   input_context: tf.distribute.InputContext | None = None,
                   seed: int | None = None) -> tf.data.Dataset:
    """Batches of parsed features from TFRecord files, for any fixed-length schema.

    `batch_size` is global: with an `input_context`, each pipeline gets its
    per-replica share and reads only its own files (or, with fewer files
    than pipelines, every n-th record), so workers never see the same data.
    Training data is shuffled (files, then records) and repeated forever;
    evaluation data is read once, in order. A `seed` makes the order
    reproducible, at some cost in read parallelism.
    """
    files = list_files(file_pattern)
    check_record_files(files)
    check_record_schema(files[0], spec)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    shard_records = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        else:
            shard_records = True
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()

    def read(path: tf.Tensor) -> tf.data.Dataset:
        records = tf.data.TFRecordDataset(path)
        # Sharding inside each file keeps pipelines disjoint whatever order
        # the (possibly non-deterministic) interleave produces.
        if shard_records:
            records = records.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        return records

    dataset = dataset.interleave(
        read, cycle_length=min(len(files), _MAX_PARALLEL_FILES),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=seed is not None or not is_training)
    if is_training:
        dataset = dataset.shuffle(_SHUFFLE_BUFFER, seed=seed)
    # Parsing whole batches is several times faster than record by record.
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(lambda records: parse_fixed_features(records, spec),
                          num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=seed is not None or not is_training)
    return dataset.prefetch(tf.data.AUTOTUNE)


def pretraining_dataset(file_pattern: str, batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, is_training: bool,
                        input_context: tf.distribute.InputContext | None = None,
                        seed: int | None = None,
                        vocab_size: int | None = None) -> tf.data.Dataset:
    """Pre-training feature dicts (the model reads its labels from them).

    Use with `strategy.distribute_datasets_from_function(lambda context:
    pretraining_dataset(..., input_context=context))` to shard per worker
    and replica; `batch_size` is then the global batch.

    With `vocab_size`, every batch's token ids are checked to lie in
    [0, vocab_size): records written with a larger vocabulary than the
    model's would otherwise train without a sound, since an XLA gather
    clamps an id past the table's end to its last row. A failing batch
    stops reading with an error that `naming_out_of_vocabulary_ids` turns
    into one naming the records.
    """
    dataset = record_dataset(file_pattern,
                             pretraining_feature_spec(max_seq_length, max_predictions_per_seq),
                             batch_size, is_training, input_context, seed)
    if vocab_size is None:
        return dataset
    return dataset.map(lambda features: _ids_checked(features, vocab_size),
                       num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=seed is not None or not is_training)


# Starts the message of a failed id check, so the error can be told from others.
_OUT_OF_VOCABULARY = "token ids outside the vocabulary; smallest and largest:"


def _ids_checked(features: dict, vocab_size: int) -> dict:
    ids = tf.concat([tf.reshape(features[name], [-1])
                     for name in ("input_ids", "masked_lm_ids")], axis=0)
    smallest, largest = tf.reduce_min(ids), tf.reduce_max(ids)
    check = tf.debugging.Assert(tf.logical_and(smallest >= 0, largest < vocab_size),
                                [_OUT_OF_VOCABULARY, smallest, largest])
    with tf.control_dependencies([check]):
        return {name: tf.identity(value) for name, value in features.items()}


@contextlib.contextmanager
def naming_out_of_vocabulary_ids(file_pattern: str, vocab_size: int,
                                 config_file: str) -> Iterator[None]:
    """Turns a failed id check of `pretraining_dataset` into an error naming the records."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        found = re.search(re.escape(_OUT_OF_VOCABULARY) + r"\]? \[(-?\d+)\] \[(-?\d+)\]",
                          error.message)
        if not found:
            raise
        smallest, largest = map(int, found.groups())
        wrong = largest if largest >= vocab_size else smallest
        raise ValueError(f"{file_pattern}: a record holds token id {wrong}, outside the "
                         f"vocabulary of {config_file} (vocab_size={vocab_size}); were the "
                         "records written with another vocabulary?") from None
