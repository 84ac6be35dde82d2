"""What int8 costs on a real task: the real MiniLM fine-tuned on real sentiment, then quantized.

Fine-tunes the real pre-trained MiniLM once in float32 on Pang & Lee's
sentence polarity data (fixed 3,000 / 1,000 split in the SST-2 layout,
`data_prep.corpora.pang_lee_polarity`; 2 epochs, learning rate 5e-5, batch
32, length 64, warmup 10%, the library's `fit` on raw text), scores the
dev set, quantizes the same model (`model.quantize("int8")`) and scores it
again. The target: int8 within 0.5 accuracy points of float32. Also
reported: how many dev predictions change, and the dev set's prediction
time (batch 64) in each precision.

    python benchmarks/int8_accuracy.py
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.corpora.pang_lee_polarity import sst2_layout_dir  # noqa: E402
from modeling.classifier import BertClassifier  # noqa: E402

EPOCHS, RATE, BATCH, LENGTH, SEED = 2, 5e-5, 32, 64, 12345
LABELS = ["0", "1"]  # the SST-2 layout's negative and positive


def read_split(path: Path) -> tuple[list[str], list[str]]:
    with open(path, encoding="utf-8", newline="") as reader:
        rows = list(csv.DictReader(reader, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row["sentence"] for row in rows], [row["label"] for row in rows]


def predictions(model: BertClassifier, texts: list[str]) -> tuple[np.ndarray, float]:
    """Predicted class per text, and the seconds the prediction took (traced beforehand)."""
    model.predict(texts[:64], batch_size=64, verbose=0)
    start = time.perf_counter()
    scores = model.predict(texts, batch_size=64, verbose=0)
    return np.argmax(scores, axis=-1), time.perf_counter() - start


def main() -> None:
    data_dir = sst2_layout_dir()
    train_texts, train_labels = read_split(data_dir / "train.tsv")
    dev_texts, dev_labels = read_split(data_dir / "dev.tsv")
    truth = np.array([LABELS.index(label) for label in dev_labels])
    keras.utils.set_random_seed(SEED)
    model = BertClassifier.from_pretrained(minilm_dir(), num_labels=2, sequence_length=LENGTH,
                                           label_names=LABELS)
    model.compile(learning_rate=RATE, warmup_proportion=0.1)
    start = time.perf_counter()
    model.fit(train_texts, train_labels, batch_size=BATCH, epochs=EPOCHS, verbose=2)
    minutes = (time.perf_counter() - start) / 60
    float_predictions, float_seconds = predictions(model, dev_texts)
    model.quantize("int8")
    int8_predictions, int8_seconds = predictions(model, dev_texts)
    result = {
        "float32_dev_accuracy": round(100 * float(np.mean(float_predictions == truth)), 2),
        "int8_dev_accuracy": round(100 * float(np.mean(int8_predictions == truth)), 2),
        "changed_predictions": int(np.sum(float_predictions != int8_predictions)),
        "dev_examples": len(dev_texts),
        "float32_dev_seconds": round(float_seconds, 2),
        "int8_dev_seconds": round(int8_seconds, 2),
        "fine_tuning_minutes": round(minutes, 1),
        "load": [round(value, 2) for value in os.getloadavg()],
    }
    result["int8_minus_float32"] = round(result["int8_dev_accuracy"]
                                         - result["float32_dev_accuracy"], 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
