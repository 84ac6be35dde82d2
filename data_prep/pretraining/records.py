"""Serialized tf.train.Examples for batches of fixed-length features, without protobuf objects.

Building a `tf.train.Example` message per instance and serializing it costs
tens of microseconds in Python, as much as everything else the pre-training
data step does per instance. The wire format of these particular messages
is simple, so it is written here directly, all rows of a batch at once:

    Example   = 0x0a len Features
    Features  = (0x0a len MapEntry)*             one entry per feature
    MapEntry  = 0x0a len key  0x12 len Feature
    Feature   = 0x1a len Int64List | 0x12 len FloatList
    Int64List = 0x0a len varint*                 packed
    FloatList = 0x0a len float32-little-endian*  packed

All in numpy: each piece of a record (headers looked up by payload size,
base-128 varint digits, float bytes) is a padded [rows, width] block with a
mask of the bytes that belong; the blocks side by side, compacted by the
mask, are the records one after another. Python only cuts them apart. The bytes parse with
`tf.train.Example.FromString` and `tf.io.parse_example` like any other
Example (tests/data_prep/pretraining/test_pretraining_instances.py checks both).
Which features a record holds, of which type and length, is the caller's
schema (`core.record_schema`), the one the reader parses with.
"""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np

from core.record_schema import RecordFeature

_INT64_LIST = b"\x1a"  # Feature field 3, length-delimited
_FLOAT_LIST = b"\x12"  # Feature field 2, length-delimited
_FIELD_1 = b"\x0a"     # field 1, length-delimited: Example.features, Features.feature, *List.value


def serialize_examples(features: Mapping[str, np.ndarray],
                       schema: Mapping[str, RecordFeature]) -> list[bytes]:
    """One serialized Example per row of the [N, length] arrays in `features`.

    Args:
        features: an array per feature of `schema`, no more and no fewer:
            floats for "float32" features, integers (non-negative) or
            booleans for "int64" ones.
        schema: the record's features, in the order they are written.
    """
    missing = [name for name in schema if name not in features]
    unknown = [name for name in features if name not in schema]
    if missing or unknown:
        raise ValueError(f"features must be those of the schema ({', '.join(schema)}); "
                         f"missing: {', '.join(missing) or 'none'}, not in the schema: "
                         f"{', '.join(unknown) or 'none'}")
    blocks = []  # (bytes [N, width], which of them belong to the record [N, width]) per piece
    sizes = []  # bytes of each piece that belong to each row [N]
    rows = None
    for name, feature in schema.items():
        values = np.asarray(features[name])
        if values.ndim != 2 or values.shape[1] != feature.length or (
                rows is not None and len(values) != rows):
            raise ValueError(f"feature {name!r} must be [{rows or 'N'}, {feature.length}], "
                             f"got {values.shape}")
        kinds = "f" if feature.dtype == "float32" else "iub"
        if values.dtype.kind not in kinds:
            raise ValueError(f"feature {name!r} is {feature.dtype} in the schema, got "
                             f"{values.dtype} values")
        rows = len(values)
        if feature.dtype == "float32":
            payload = np.ascontiguousarray(values, dtype="<f4").view(np.uint8)
            payload = (payload, np.ones(payload.shape, dtype=bool))
            payload_sizes = np.full(rows, payload[0].shape[1])
            list_tag = _FLOAT_LIST
        else:
            payload = _varint_block(values)
            payload_sizes = np.count_nonzero(payload[1], axis=1)
            list_tag = _INT64_LIST
        header, header_sizes = _feature_headers(name, list_tag, payload_sizes,
                                                payload[0].shape[1])
        blocks += [header, payload]
        sizes += [header_sizes, payload_sizes]
    if not rows:
        return []
    body_sizes = np.sum(sizes, axis=0)
    size_digits, size_present = _varint_block(body_sizes[:, None])
    blocks.insert(0, (np.concatenate([np.full((rows, 1), _FIELD_1[0], np.uint8), size_digits], 1),
                      np.concatenate([np.ones((rows, 1), bool), size_present], 1)))
    outer_sizes = 1 + np.count_nonzero(size_present, axis=1)
    data = np.concatenate([block for block, _ in blocks], axis=1)
    present = np.concatenate([present for _, present in blocks], axis=1)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(body_sizes + outer_sizes, out=offsets[1:])
    buffer = data.reshape(-1)[np.flatnonzero(present.reshape(-1))].tobytes()
    offsets = offsets.tolist()
    return [buffer[start:stop] for start, stop in zip(offsets[:-1], offsets[1:])]


def _varint_block(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Base-128 varint digits of [N, K] values as [N, K * width] bytes, and which are written."""
    if values.size and values.min() < 0:
        raise ValueError("only non-negative integers are encoded here")
    largest = int(values.max()) if values.size else 0
    values = values.astype(np.uint32 if largest < 2**32 else np.uint64)
    width = max(1, (largest.bit_length() + 6) // 7)
    digits = np.empty(values.shape + (width,), dtype=np.uint8)
    present = np.ones(values.shape + (width,), dtype=bool)
    for k in range(width):
        shifted = values >> (7 * k) if k else values
        digits[..., k] = shifted & 0x7F
        if k + 1 < width:
            present[..., k + 1] = shifted >= 0x80
            digits[..., k] |= present[..., k + 1].view(np.uint8) << 7
    return digits.reshape(len(values), -1), present.reshape(len(values), -1)


def _feature_headers(name: str, list_tag: bytes, payload_sizes: np.ndarray, most: int
                     ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Everything before one feature's packed values, for each row's payload size (<= `most`):
    padded [N, width] bytes and their mask, and the bytes of each row [N]."""
    table, lengths = _header_table(name, list_tag, most)
    row_lengths = lengths[payload_sizes]
    return (table[payload_sizes], np.arange(table.shape[1]) < row_lengths[:, None]), row_lengths


@functools.lru_cache(maxsize=64)
def _header_table(name: str, list_tag: bytes, most: int) -> tuple[np.ndarray, np.ndarray]:
    """The header of every payload size 0..`most`, padded, and its length: made once per run,
    since a batch holds hundreds of distinct sizes (varints vary in length)."""
    key = _FIELD_1 + _varint(len(name.encode())) + name.encode()

    def header(payload_size: int) -> bytes:
        values = _FIELD_1 + _varint(payload_size)
        value_list = list_tag + _varint(len(values) + payload_size) + values
        feature = b"\x12" + _varint(len(value_list) + payload_size) + value_list
        return _FIELD_1 + _varint(len(key) + len(feature) + payload_size) + key + feature

    blobs = [header(size) for size in range(most + 1)]
    lengths = np.array([len(blob) for blob in blobs])
    table = np.zeros((len(blobs), int(lengths.max())), dtype=np.uint8)
    for row, blob in enumerate(blobs):
        table[row, :len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    return table, lengths


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
