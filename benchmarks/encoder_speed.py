"""Encoder inference: our BertEncoder against keras-hub's BertBackbone at the same config.

Both models are built at BERT-Base size (L12/H768/A12, intermediate 3072,
vocabulary 30522) with random weights, in float32, and called on the same
random token ids through a `tf.function` each (no Keras `predict` overhead
for either), at batch 1 and batch 32 with sequence length 128. Our encoder
is also timed with XLA (`jit_compile=True`), reported as a separate row,
since keras-hub leaves that choice to the user too.

    make bench            # or: .venv-bench/bin/python benchmarks/encoder_speed.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from core import extras  # noqa: E402
from network.config import BertConfig  # noqa: E402
from network.encoder import BertEncoder  # noqa: E402

with extras.needed("benchmarks"):
    import keras_hub

SEQUENCE_LENGTH = 128


def main() -> None:
    config = BertConfig.preset("base")
    ours = BertEncoder(config)
    peer = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=0.1,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)

    @tf.function
    def ours_call(ids, mask, segments):
        return ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                    training=False)["sequence_output"]

    @tf.function(jit_compile=True)
    def ours_xla_call(ids, mask, segments):
        return ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                    training=False)["sequence_output"]

    @tf.function
    def peer_call(ids, mask, segments):
        return peer({"token_ids": ids, "padding_mask": mask, "segment_ids": segments},
                    training=False)["sequence_output"]

    results, comparisons = [], []
    generator = np.random.default_rng(0)
    for batch, repeats in ((1, 20), (32, 5)):
        ids = tf.constant(generator.integers(0, config.vocab_size, (batch, SEQUENCE_LENGTH)),
                          tf.int32)
        mask = tf.ones_like(ids)
        segments = tf.zeros_like(ids)
        print(f"batch {batch} x {SEQUENCE_LENGTH} (sequences/s)")
        timed = {
            name: harness.measure(f"{name}, batch {batch}",
                                  lambda call=call: call(ids, mask, segments).numpy(), batch,
                                  repeats=repeats, warmup=2)
            for name, call in (("ours", ours_call), ("ours + XLA", ours_xla_call),
                               ("keras-hub BertBackbone", peer_call))}
        results += timed.values()
        for name in ("ours", "ours + XLA"):
            comparisons.append(harness.Comparison(
                f"{name} vs keras-hub, batch {batch}, seq {SEQUENCE_LENGTH}", timed[name],
                timed["keras-hub BertBackbone"], target=1.0))
    report = harness.render_report(
        "Encoder inference throughput", __doc__.split("\n\n")[1],
        harness.machine_info(["tensorflow", "keras", "keras-hub"]), results, comparisons,
        "sequences")
    harness.write_report("encoder_inference", report)


if __name__ == "__main__":
    main()
