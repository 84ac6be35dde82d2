"""TFRecord files -> tf.data pipelines with static shapes, sharded per worker and replica.

The pre-training records are the original tools' tf.train.Examples (see
DESIGN.md); `pretraining_dataset` reads them unchanged. Batches keep a fixed
size (`drop_remainder=True`) so every tensor has a static shape, which TPUs
and XLA need. Integer features are stored as int64 (the only integer type a
tf.train.Example holds) and cast to int32, what the model's embedding
lookups and TPUs want.

Before building the pipeline, the first record is checked against the
expected schema in Python: a wrong `max_seq_length` or a missing feature
otherwise only surfaces as an op error deep inside the first training step.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

# Records in the shuffle buffer; the original used 100 after interleaving.
_SHUFFLE_BUFFER = 1000
_MAX_PARALLEL_FILES = 8


def pretraining_feature_spec(max_seq_length: int,
                             max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """The features the original `create_pretraining_data.py` writes, with their shapes."""
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    predictions = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {
        "input_ids": sequence, "input_mask": sequence, "segment_ids": sequence,
        "masked_lm_positions": predictions, "masked_lm_ids": predictions,
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


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
        raise ValueError(f"{path}: records do not match the expected schema: "
                         f"{'; '.join(problems)} (check --max_seq_length and "
                         "--max_predictions_per_seq against the data)")


def list_files(file_pattern: str) -> list[str]:
    """Files matching a glob, or a comma-separated list of globs, sorted."""
    files = []
    for pattern in (part.strip() for part in file_pattern.split(",")):
        if pattern:
            files.extend(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no input file matches {file_pattern!r}")
    return sorted(set(files))


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
                        seed: int | None = None) -> tf.data.Dataset:
    """Pre-training feature dicts (the model reads its labels from them).

    Use with `strategy.distribute_datasets_from_function(lambda context:
    pretraining_dataset(..., input_context=context))` to shard per worker
    and replica; `batch_size` is then the global batch.
    """
    return record_dataset(file_pattern,
                          pretraining_feature_spec(max_seq_length, max_predictions_per_seq),
                          batch_size, is_training, input_context, seed)
