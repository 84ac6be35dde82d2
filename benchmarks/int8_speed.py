"""Int8 inference speed on CPU: float32, Keras' int8 arithmetic, and the oneDNN int8 path.

Two parts, each at the shapes of MiniLM (L6/H384/A12, intermediate 1536)
and BERT-Base (L12/H768/A12, intermediate 3072), random weights, sequence
length 128, TensorFlow limited to `--threads` threads:

- layers: one projection [batch * 128, inputs] x [inputs, outputs] as
  `keras.layers.Dense` in float32, the same layer after Keras'
  `quantize("int8")` (Keras' own int8 call), and our `Dense` after
  `quantize("int8")` (oneDNN's int8 kernel, `network.layers.int8`);
- encoders: `BertEncoder` in float32 (a `tf.function`, and with
  `jit_compile=True`), and quantized: our int8 call, the same under XLA
  (which computes Keras' int8 arithmetic as an XLA int8 dot), and, at batch
  1, the same traced with fast paths off (Keras' int8 arithmetic on
  TensorFlow's own int8 kernel, as Keras runs it; GELU unfused too).

The machine may be shared: every variant of a case is timed once per round,
rounds interleaved, and each figure is the median over rounds; the ratio to
float32 is the median of the per-round ratios.

    python benchmarks/int8_speed.py [--sizes=minilm,base] [--batches=1,32] [--rounds=5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from network.config import BertConfig  # noqa: E402
from network.encoder import BertEncoder  # noqa: E402
from network.layers import fast_paths, int8  # noqa: E402
from network.layers.dense import Dense  # noqa: E402

SEQUENCE_LENGTH = 128
SIZES = {
    "minilm": BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                         num_attention_heads=12, intermediate_size=1536),
    "base": BertConfig.preset("base"),
}


def interleaved(calls: dict, work: float, rounds: int, baseline: str) -> list[tuple]:
    """(name, units/s median, ratio to `baseline` median) per call, timed in interleaved rounds."""
    for call in calls.values():  # tracing, compiling, oneDNN's primitive caches
        call()
        call()
    seconds = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    rows = []
    for name, times in seconds.items():
        ratios = [base / own for base, own in zip(seconds[baseline], times)]
        rows.append((name, work / statistics.median(times), statistics.median(ratios)))
        print(f"    {name}: {rows[-1][1]:.1f}/s, x{rows[-1][2]:.2f}", flush=True)
    return rows


def layer_cases(config: BertConfig, batch: int, rounds: int) -> list[tuple]:
    rows = batch * SEQUENCE_LENGTH
    shapes = [(config.hidden_size, config.hidden_size),
              (config.hidden_size, config.intermediate_size),
              (config.intermediate_size, config.hidden_size)]
    results = []
    for inputs, outputs in shapes:
        x = tf.constant(np.random.default_rng(0).standard_normal((rows, inputs)), tf.float32)
        plain = keras.layers.Dense(outputs)
        plain.build((None, inputs))
        keras_int8 = keras.layers.Dense(outputs)
        keras_int8.build((None, inputs))
        keras_int8.set_weights(plain.get_weights())
        keras_int8.quantize("int8")
        ours = Dense(outputs)
        ours.build((None, inputs))
        ours.set_weights(plain.get_weights())
        ours.quantize("int8")
        calls = {label: (lambda f=tf.function(layer): f(x).numpy())
                 for label, layer in (("float32", plain), ("Keras int8", keras_int8),
                                      ("ours int8 (oneDNN)", ours))}
        print(f"  [{rows}, {inputs}] x [{inputs}, {outputs}]", flush=True)
        for name, rate, ratio in interleaved(calls, 2.0 * rows * inputs * outputs * 1e-9,
                                             rounds, "float32"):
            results.append((f"{rows}x{inputs}x{outputs}", name, rate, ratio))
    return results


def encoder_cases(config: BertConfig, batch: int, rounds: int) -> list[tuple]:
    generator = np.random.default_rng(0)
    features = {"input_ids": tf.constant(generator.integers(0, config.vocab_size,
                                                            (batch, SEQUENCE_LENGTH)), tf.int32),
                "input_mask": tf.ones((batch, SEQUENCE_LENGTH), tf.int32),
                "segment_ids": tf.zeros((batch, SEQUENCE_LENGTH), tf.int32)}
    float_model = BertEncoder(config)
    quantized = BertEncoder(config)
    quantized.set_weights(float_model.get_weights())
    quantized.quantize("int8")

    def traced(model, jit_compile=False):
        function = tf.function(lambda: model(features, training=False)["sequence_output"],
                               jit_compile=jit_compile)
        return lambda: function().numpy()

    calls = {"float32": traced(float_model), "float32 XLA": traced(float_model, True),
             "int8 (oneDNN)": traced(quantized), "int8 XLA": traced(quantized, True)}
    if batch == 1:
        with fast_paths.disabled():
            plain = tf.function(lambda: quantized(features, training=False)["sequence_output"])
            plain.get_concrete_function()  # traced now, without fast paths
        calls["int8 Keras arithmetic, no XLA"] = lambda: plain().numpy()
    return [(name, rate, ratio)
            for name, rate, ratio in interleaved(calls, batch, rounds, "float32")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="minilm,base")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parts", default="layers,encoders")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    print(harness.machine_info(["tensorflow", "keras"]))
    print("oneDNN int8 product available:", int8.onednn_available())
    print("load:", os.getloadavg())
    parts = args.parts.split(",")
    for size in args.sizes.split(","):
        config = SIZES[size]
        for batch in (int(value) for value in args.batches.split(",")):
            if "layers" in parts:
                print(f"{size} layers, batch {batch} (GOP/s)", flush=True)
                rows = layer_cases(config, batch, args.rounds)
                print(harness.markdown_table(
                    ("shape", "variant", "GOP/s", "vs float32"),
                    [(shape, name, f"{rate:.0f}", f"{ratio:.2f}")
                     for shape, name, rate, ratio in rows]))
            if "encoders" in parts:
                print(f"{size} encoder, batch {batch} (sequences/s)", flush=True)
                rows = encoder_cases(config, batch, args.rounds)
                print(harness.markdown_table(
                    ("variant", "sequences/s", "vs float32"),
                    [(name, f"{rate:.1f}", f"{ratio:.2f}") for name, rate, ratio in rows]))
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
