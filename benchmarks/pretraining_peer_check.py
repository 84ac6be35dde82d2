"""Our pre-training against keras-hub's on the same records: masked-LM accuracy against steps.

A reproduction's pre-training can look healthy (the loss falls) and still
learn more slowly than it should; the test is a peer trained on the same
batches with the same hyperparameters. Both models here are the same size,
start from the same initializer scale, read the same shuffled batches
(`training.input_pipeline.pretraining_dataset` with one seed feeds both) and
are scored by one function on the same held-out batches:

- ours: `BertPretrainer(objective="mlm")` through `training.loop.TrainingLoop`
  (as `run_pretraining.py --objective=mlm`) with the original AdamW, no bias
  correction;
- keras-hub: `BertMaskedLM` through `fit`, with Keras' AdamW (bias-corrected)
  set up as the original's: its learning-rate schedule (the same
  `WarmupLinearDecay` as ours, a function of the step only), weight decay
  0.01 off biases and LayerNorm, epsilon 1e-6, gradients clipped to global
  norm 1.0.

Run in the benchmark environment (it has keras-hub):

    .venv-bench/bin/python benchmarks/pretraining_peer_check.py \\
        --input_file='RECORDS*' --vocab_file=VOCAB [--steps=2000 --eval_every=500]

The records must be masked-LM records of `--max_seq_length` and
`--max_predictions_per_seq` (next-sentence labels, if any, are ignored).
Writes `benchmarks/results/pretraining_peer_check.md` and its PNG.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from core import extras  # noqa: E402
from modeling.pretrainer import BertPretrainer  # noqa: E402
from network.config import BertConfig  # noqa: E402
from training.input_pipeline import pretraining_dataset  # noqa: E402
from training.loop import TrainingLoop  # noqa: E402
from training.optimization import WarmupLinearDecay, create_optimizer  # noqa: E402

with extras.needed("benchmarks"):
    import keras_hub

RESULTS = ROOT / "benchmarks" / "results"


def masked_lm_accuracy(predict, batches) -> float:
    """Weighted accuracy of `predict(features)` ([B, P, vocab] logits) over `batches`."""
    correct = total = 0.0
    for features in batches:
        logits = predict(features)
        hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                features["masked_lm_ids"]), tf.float32)
        correct += float(tf.reduce_sum(hits * features["masked_lm_weights"]))
        total += float(tf.reduce_sum(features["masked_lm_weights"]))
    return correct / total


def keras_hub_inputs(features: dict):
    inputs = {"token_ids": features["input_ids"], "padding_mask": features["input_mask"],
              "segment_ids": features["segment_ids"],
              "mask_positions": features["masked_lm_positions"]}
    return inputs, features["masked_lm_ids"], features["masked_lm_weights"]


def train_ours(args, config: BertConfig, data, evaluate) -> list[float]:
    keras.utils.set_random_seed(args.seed)
    model = BertPretrainer(config, objective="mlm")
    optimizer = create_optimizer(args.learning_rate, args.steps, args.warmup)
    scratch = tempfile.TemporaryDirectory(prefix="peer-check-")
    trainer = TrainingLoop(model, optimizer, tf.distribute.get_strategy(),
                      model.pretraining_losses, scratch.name, jit_compile=True)
    trainer.restore_newest_checkpoint()  # none: the folder is new
    iterator = iter(data)

    class _Same:  # hands the one iterator to every train() call, so the batches continue
        def __iter__(self):
            return iterator

    curve = []
    for end in range(args.eval_every, args.steps + 1, args.eval_every):
        trainer.train(_Same(), end, 50)
        curve.append(evaluate(lambda f: model(f, training=False)["masked_lm_logits"]))
        print(f"ours      step {end}: masked-LM accuracy {curve[-1]:.4f}", flush=True)
    scratch.cleanup()
    return curve


def train_keras_hub(args, config: BertConfig, data, evaluate) -> list[float]:
    keras.utils.set_random_seed(args.seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    optimizer = keras.optimizers.AdamW(
        WarmupLinearDecay(args.learning_rate, args.steps, args.warmup), weight_decay=0.01,
        beta_1=0.9, beta_2=0.999, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    batches = data.map(keras_hub_inputs)
    curve = []

    class Evaluate(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            curve.append(evaluate(lambda f: model(keras_hub_inputs(f)[0], training=False)))
            print(f"keras-hub step {(epoch + 1) * args.eval_every}: masked-LM accuracy "
                  f"{curve[-1]:.4f}", flush=True)

    model.fit(batches, steps_per_epoch=args.eval_every, epochs=args.steps // args.eval_every,
              callbacks=[Evaluate()], verbose=0)
    return curve


def report(args, curves: dict[str, list[float]], seconds: dict[str, float], argv) -> str:
    steps = list(range(args.eval_every, args.steps + 1, args.eval_every))
    lines = ["# Pre-training dynamics against keras-hub", "", *__doc__.split("\n\n")[1:3], "",
             "Command: `" + shlex.join(["python", "benchmarks/pretraining_peer_check.py",
                                        *argv]).replace(str(Path.home()), "~") + "`", "",
             f"Model L{args.layers}/H{args.hidden}/A{args.heads}, batch {args.batch} x "
             f"{args.max_seq_length}, {args.max_predictions_per_seq} masked positions, "
             f"peak rate {args.learning_rate:g}, warmup {args.warmup}, {args.steps} steps; "
             f"accuracy on the first {args.eval_batches} batches of {args.batch} of the records "
             "in file order.", "",
             "| step | " + " | ".join(curves) + " | ours - keras-hub |",
             "|---|" + "---|" * (len(curves) + 1)]
    for index, step in enumerate(steps):
        values = [curves[name][index] for name in curves]
        lines.append(f"| {step} | " + " | ".join(f"{value:.4f}" for value in values)
                     + f" | {values[0] - values[1]:+.4f} |")
    lines += ["", "Wall time (training and evaluation, one process, the machine shared): " +
              ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items()) + ".", "",
              "## Machine", ""]
    info = harness.machine_info(["tensorflow", "keras", "keras-hub"])
    lines += [f"- {key}: {value}" for key, value in info.items()]
    return "\n".join(lines) + "\n"


def plot(args, curves: dict[str, list[float]], path: Path) -> None:
    with extras.needed("benchmarks"):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    steps = list(range(args.eval_every, args.steps + 1, args.eval_every))
    figure, axis = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        axis.plot(steps, curve, marker="o", label=name)
    axis.set_xlabel("pre-training step")
    axis.set_ylabel("masked-LM accuracy (held-out batches)")
    axis.set_title("Same records and hyperparameters: ours vs keras-hub")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_file", required=True, help="masked-LM TFRecords (a glob)")
    parser.add_argument("--vocab_file", required=True, help="the records' vocabulary")
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--max_predictions_per_seq", type=int, default=5)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--name", default="pretraining_peer_check", help="results file stem")
    args = parser.parse_args(argv)
    for name in ("steps", "eval_every", "batch", "eval_batches", "learning_rate"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup must be in [0, --steps), got {args.warmup}")
    if args.steps % args.eval_every:
        parser.error(f"--steps ({args.steps}) must be a multiple of --eval_every "
                     f"({args.eval_every})")
    if not os.path.isfile(args.vocab_file):
        parser.error(f"--vocab_file {args.vocab_file} does not exist")
    with open(args.vocab_file, encoding="utf-8") as reader:
        vocab_size = sum(1 for _ in reader)
    config = BertConfig(vocab_size=vocab_size, hidden_size=args.hidden,
                        num_hidden_layers=args.layers, num_attention_heads=args.heads,
                        intermediate_size=4 * args.hidden)

    def data():
        return pretraining_dataset(args.input_file, args.batch, args.max_seq_length,
                                   args.max_predictions_per_seq, is_training=True,
                                   seed=args.seed)

    held_out = list(pretraining_dataset(args.input_file, args.batch, args.max_seq_length,
                                        args.max_predictions_per_seq, is_training=False)
                    .take(args.eval_batches))
    evaluate = lambda predict: masked_lm_accuracy(predict, held_out)  # noqa: E731
    curves, seconds = {}, {}
    for name, train in (("ours", train_ours), ("keras-hub", train_keras_hub)):
        started = time.monotonic()
        curves[name] = train(args, config, data(), evaluate)
        seconds[name] = time.monotonic() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = report(args, curves, seconds, argv)
    (RESULTS / f"{args.name}.md").write_text(text, encoding="utf-8")
    plot(args, curves, RESULTS / f"{args.name}.png")
    print(text)


if __name__ == "__main__":
    main()
