"""A small synthetic corpus and vocabulary shared by the pre-training data tests."""

import random
from pathlib import Path

from data_prep.pretraining.instances import InstanceOptions
from data_prep.pretraining.settings import Settings

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "walk", "run", "jump", "blue", "red", "green",
         "house", "tree", "river", "stone", "light", "night", "day", "sun"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS, "##s", "##ing", "##ed"]
CLS, SEP = VOCAB.index("[CLS]"), VOCAB.index("[SEP]")


def write_corpus(path, documents, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for document in range(documents):
            for _ in range(rng.randint(1, 12)):
                words = [rng.choice(WORDS) + rng.choice(["", "", "s", "ing", "ed"])
                         for _ in range(rng.randint(2, 14))]
                out.write(" ".join(words) + " .\n")
            out.write("\n" if document < documents - 1 else "")


def make_corpus(root: Path) -> tuple[Path, Path]:
    """Two corpus files (12 documents), an empty file, a document without tokens; and a vocab."""
    folder = root / "in"
    folder.mkdir()
    write_corpus(folder / "a.txt", 7, seed=1)
    write_corpus(folder / "b.txt", 5, seed=2)
    (folder / "c.txt").write_text("", encoding="utf-8")
    (folder / "d.txt").write_text("\u200b\n", encoding="utf-8")  # a format char: no tokens
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return folder, vocab


def settings_for(corpus, output, **changes):
    folder, vocab = corpus
    values = dict(input_patterns=(str(folder / "*.txt"),), output_files=(str(output),),
                  vocab_file=str(vocab), num_output_shards=3, documents_per_chunk=2,
                  num_workers=1, options=InstanceOptions(max_seq_length=32,
                                                         max_predictions_per_seq=5, dupe_factor=3))
    values.update(changes)
    return Settings(**values)
