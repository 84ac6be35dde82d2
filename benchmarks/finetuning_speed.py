"""Fine-tuning throughput: our classifier training step against keras-hub's BertTextClassifier.

Both train a 2-class classifier on the same random token ids at the same
config (MiniLM's size: 6 layers, hidden 384, 12 heads, intermediate 1536,
vocabulary 30522), batch 32, sequence length 128, float32, on one device:
ours through `training.loop.Trainer` with the original AdamW (what
`run_classifier.py` runs), keras-hub's through `fit` with Keras' AdamW, its
usual path. Compilation and the first steps are excluded (warm-up); each
repeat times a fixed number of steps.

    make bench            # or: .venv-bench/bin/python benchmarks/finetuning_speed.py
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from modeling.config import BertConfig  # noqa: E402
from modeling.task_models import BertClassifier, classification_loss  # noqa: E402
from training.loop import Trainer  # noqa: E402
from training.optimization import create_optimizer  # noqa: E402

BATCH, LENGTH, STEPS = 32, 128, 4


def main() -> None:
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536)
    generator = np.random.default_rng(0)
    ids = generator.integers(0, config.vocab_size, (BATCH * 4, LENGTH)).astype(np.int32)
    labels = generator.integers(0, 2, BATCH * 4).astype(np.int32)
    ours_data = tf.data.Dataset.from_tensor_slices(
        {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
         "label_ids": labels}).repeat().batch(BATCH, drop_remainder=True)
    peer_data = tf.data.Dataset.from_tensor_slices((
        {"token_ids": ids, "padding_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)},
        labels)).repeat().batch(BATCH, drop_remainder=True)

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope(), tempfile.TemporaryDirectory() as scratch:
        model = BertClassifier(config, num_labels=2)
        optimizer = create_optimizer(5e-5, 10_000, 100)
        trainer = Trainer(model, optimizer, strategy, classification_loss, scratch)
        distributed = strategy.experimental_distribute_dataset(ours_data)
        target = [trainer.step]

        def ours_steps():
            target[0] += STEPS
            trainer.train(distributed, target[0], steps_per_loop=STEPS)

        print(f"batch {BATCH} x {LENGTH}, {STEPS} steps per repeat (examples/s)")
        ours = harness.measure("ours: BertClassifier + Trainer", ours_steps, BATCH * STEPS,
                               repeats=3, warmup=1)

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings)
    peer_model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    peer_model.compile(optimizer=keras.optimizers.AdamW(5e-5),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    peer = harness.measure(
        "keras-hub: BertTextClassifier.fit",
        lambda: peer_model.fit(peer_data, steps_per_epoch=STEPS, epochs=1, verbose=0),
        BATCH * STEPS, repeats=3, warmup=1)

    comparison = harness.Comparison(f"MiniLM-size classifier, batch {BATCH}, seq {LENGTH}",
                                    ours, peer, target=1.0)
    report = harness.render_report(
        "Fine-tuning throughput", __doc__.split("\n\n")[1],
        harness.machine_info(["tensorflow", "keras", "keras-hub"]), [ours, peer], [comparison],
        "examples")
    harness.write_report("finetuning", report)


if __name__ == "__main__":
    main()
