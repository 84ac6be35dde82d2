"""Our fine-tuning and Hugging Face PyTorch's, update by update, from the same start.

    python -m experiments.glue_step_check --glue_dir=../shared/data/glue

Seeds move a GLUE score by points, so comparing two implementations' scores
finds only large defects. Here both fine-tune the real MiniLM on the same
batches of a task's training set (the first `--updates` x 32 examples, in
file order) with dropout off and the same initial classifier, so that they
should compute the same function: the loss of every update and the dev logits
after the last must agree to float32 rounding, for the original optimizer and
for the bias-corrected one, with the recipe's schedule (warmup over the first
tenth, the original's linear decay), weight decay and clipping. Ours is the
library's `BertClassifier` trained with the runners' optimizer
(`training.optimization.create_optimizer`) and loss; PyTorch's is
`experiments/peers/hf_glue_finetune.py`, the reference of the GLUE table.
Writes `experiments/results/glue_step_check.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from core.atomic import write_atomically
from data_prep.corpora.assets import minilm_dir
from data_prep.datasets import glue
from experiments import glue_peer
from modeling import BertClassifier, load_tokenizer
from modeling.losses import classification_loss
from training.optimization import create_optimizer

BATCH, LENGTH, DEV = 32, 128, 64


def ours(model_dir: Path, train: dict, dev: dict, updates: int, rate: float,
         bias_correction: bool) -> tuple[list[float], np.ndarray, list]:
    """Losses of each update, dev logits after the last, and the initial classifier weights
    ([labels, hidden] and [labels], as PyTorch's `nn.Linear` holds them)."""
    keras.utils.set_random_seed(12345)
    model = BertClassifier.from_pretrained(str(model_dir), num_labels=2, preprocessor=None,
                                           hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0)
    start = [weight.tolist() for weight in model.classifier.get_weights()]
    optimizer = create_optimizer(rate, updates, int(updates * 0.1),
                                 adam_bias_correction=bias_correction)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            loss = classification_loss(features, model(features, training=True))["loss"]
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    losses = [float(step({key: value[i * BATCH:(i + 1) * BATCH]
                          for key, value in train.items()})) for i in range(updates)]
    logits = model({key: value for key, value in dev.items() if key != "label_ids"},
                   training=False)
    return losses, np.asarray(logits), start


def pytorch(torch_python: str, model_dir: Path, labels: list[str], examples: list, dev: list,
            start: list, updates: int, rate: float, bias_correction: bool
            ) -> tuple[list[float], np.ndarray]:
    """The same updates by the reference: its losses and dev logits."""
    def texts(rows):
        return {"a": [e.text_a for e in rows], "b": [e.text_b for e in rows]}

    request = {"model_dir": str(model_dir), "labels": labels, "max_seq_length": LENGTH,
               "batch_size": BATCH, "epochs": 1.0, "learning_rate": rate,
               "warmup_proportion": 0.1, "seed": 12345, "bias_correction": bias_correction,
               "dropout": 0.0, "classifier": {"weight": start[0], "bias": start[1]},
               "batches": [list(range(i * BATCH, (i + 1) * BATCH)) for i in range(updates)],
               "train": {**texts(examples), "y": [labels.index(e.label) for e in examples]},
               "predict": {"dev": texts(dev)}}
    with tempfile.TemporaryDirectory() as folder:
        request_path, answer_path = Path(folder, "request.json"), Path(folder, "answer.json")
        request_path.write_text(json.dumps(request), encoding="utf-8")
        subprocess.run([torch_python, str(glue_peer.PEER), str(request_path), str(answer_path)],
                       check=True, env=dict(os.environ, HF_HUB_OFFLINE="1",
                                            OMP_WAIT_POLICY="PASSIVE"))
        answer = json.loads(answer_path.read_text(encoding="utf-8"))
    return [loss for _, loss in answer["train_loss"]], np.asarray(answer["outputs"]["dev"])


def compare(args: argparse.Namespace, task: str) -> list[str]:
    """One table row per optimizer: the largest differences of losses and logits."""
    processor, data_dir = glue.get_processor(task), str(Path(args.glue_dir) / task)
    examples = processor.train_examples(data_dir)[:args.updates * BATCH]
    dev = processor.dev_sets(data_dir)["dev"][:DEV]
    model_dir = minilm_dir()
    tokenizer = load_tokenizer(str(model_dir))
    train = glue.convert_examples(examples, tokenizer, LENGTH, processor.labels)
    dev_arrays = glue.convert_examples(dev, tokenizer, LENGTH, processor.labels).features
    rows = []
    for bias_correction in (False, True):
        our_losses, our_logits, start = ours(model_dir, train.features, dev_arrays,
                                             args.updates, args.learning_rate, bias_correction)
        peer_losses, peer_logits = pytorch(args.torch_python, model_dir, processor.labels,
                                           examples, dev, start, args.updates,
                                           args.learning_rate, bias_correction)
        rows.append("| " + " | ".join([
            f"{processor.name} ({train.num_truncated} of {len(examples)})",
            "bias-corrected Adam" if bias_correction else "original (no bias correction)",
            " ".join(f"{loss:.4f}" for loss in our_losses),
            " ".join(f"{loss:.4f}" for loss in peer_losses),
            f"{np.max(np.abs(np.subtract(our_losses, peer_losses))):.1e}",
            f"{np.max(np.abs(our_logits - peer_logits)):.1e}",
            f"{np.mean(our_logits.argmax(1) == peer_logits.argmax(1)):.3f}"]) + " |")
    return rows


def _tasks(text: str) -> list[str]:
    """Comma-separated two-class GLUE tasks, by their GLUE names."""
    names = [task.strip() for task in text.split(",") if task.strip()]
    try:
        processors = [glue.get_processor(name) for name in names]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not names or any(len(p.labels or ()) != 2 for p in processors):
        raise argparse.ArgumentTypeError(f"expected two-class GLUE tasks, got {text!r}")
    return [processor.name for processor in processors]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.glue_step_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue_dir", default=os.environ.get("GLUE_DIR"), required=False,
                        help="The GLUE download's folder (default: $GLUE_DIR).")
    parser.add_argument("--tasks", default="MRPC,RTE", type=_tasks,
                        help="Comma-separated two-class GLUE tasks (default: MRPC,RTE).")
    parser.add_argument("--updates", type=int, default=10, help="Updates of 32 examples.")
    parser.add_argument("--learning_rate", type=float, default=5e-5, help="Peak rate.")
    parser.add_argument("--torch_python", default=glue_peer.TORCH_PYTHON,
                        help="The torch environment's interpreter.")
    parser.add_argument("--output", default="experiments/results/glue_step_check.md",
                        help="The markdown written.")
    args = parser.parse_args(argv)
    if not args.glue_dir:
        parser.error("--glue_dir (or $GLUE_DIR) is required")
    if args.updates < 2:
        parser.error(f"--updates must be at least 2, got {args.updates}")
    try:
        rows = [row for task in args.tasks for row in compare(args, task)]
    except (ValueError, OSError, subprocess.CalledProcessError) as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    command = (f"python -m experiments.glue_step_check --glue_dir=$GLUE_DIR "
               f"--tasks={','.join(args.tasks)} --updates={args.updates} "
               f"--learning_rate={args.learning_rate:g}")
    write_atomically(args.output, "\n".join([
        "# Ours and PyTorch update by update (GLUE fine-tuning of the real MiniLM)", "",
        __doc__.split("\n\n")[2].replace("\n", " "), "", f"`{command}`", "",
        "| task (training examples truncated) | optimizer | our loss per update | PyTorch's | "
        "largest loss difference | largest dev logit difference | same dev prediction |",
        "|---|---|---|---|---|---|---|", *rows, ""]))
    print(Path(args.output).read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
