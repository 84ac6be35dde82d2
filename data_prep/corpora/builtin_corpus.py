"""Real built-in corpora in the pre-training input format, cached on first use.

Demos and tests need genuine prose, and this project may not commit any.
The `gensim` wheel carries two small real corpora, so they are fetched from
the package registry and converted once into the format that
`create_pretraining_data` and `vocab` read (one sentence per line, a blank
line between documents):

- `wikipedia_sample_path()`: about a hundred English Wikipedia articles
  from a 2016 dump, markup stripped to prose paragraphs (see `wikitext`);
- `news_sample_path()`: the Lee background corpus of 300 Australian news
  stories, one story per line in the wheel.

Both are split into sentences with `sentence_split`. The files land in
`cache_dir()/corpora/`, written under a temporary name and renamed when
complete, so an interrupted run never leaves a file later runs would trust.

    python -m data_prep.corpora.builtin_corpus   # fetch both, print their statistics
"""

from __future__ import annotations

import bz2
import dataclasses
import io
import zipfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from absl import flags

from core import atomic, program
from data_prep.corpora import assets
from data_prep.corpora.wikitext import article_paragraphs, iter_articles
from text.sentence_split import split_sentences

GENSIM_PACKAGE = ("gensim", "4.4.0")
WIKIPEDIA_MEMBER = ("gensim/test/test_data/"
                    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
NEWS_MEMBER = "gensim/test/test_data/lee_background.cor"
WIKIPEDIA_FILE = "wikipedia_sample.txt"
NEWS_FILE = "news_sample.txt"

Document = list[str]


@dataclasses.dataclass(frozen=True)
class CorpusStatistics:
    """Size of a corpus file in the one-sentence-per-line format."""

    documents: int
    sentences: int
    words: int
    bytes: int

    def __str__(self) -> str:
        return (f"{self.documents} documents, {self.sentences} sentences, "
                f"{self.words} words, {self.bytes / 2**20:.2f} MiB")


def wikipedia_sample_path() -> Path:
    """The Wikipedia sample as a corpus file, built on the first call."""
    return _cached_corpus(WIKIPEDIA_FILE, lambda: wikipedia_documents(_wheel_member(WIKIPEDIA_MEMBER)))


def news_sample_path() -> Path:
    """The Lee news sample as a corpus file, built on the first call."""
    return _cached_corpus(NEWS_FILE, lambda: news_documents(_wheel_member(NEWS_MEMBER)))


def wikipedia_documents(compressed_dump: bytes) -> Iterator[Document]:
    """Sentences of each article with prose in a bz2-compressed MediaWiki dump."""
    with bz2.open(io.BytesIO(compressed_dump)) as dump:
        for _, wikitext in iter_articles(dump):
            sentences = [sentence for paragraph in article_paragraphs(wikitext)
                         for sentence in split_sentences(paragraph)]
            if sentences:
                yield sentences


def news_documents(raw: bytes) -> Iterator[Document]:
    """Sentences of each story in a one-document-per-line UTF-8 file."""
    for line in raw.decode("utf-8").splitlines():
        sentences = split_sentences(line)
        if sentences:
            yield sentences


def write_corpus(documents: Iterable[Document], path: Path) -> None:
    """Writes documents as sentence lines with blank lines between them, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_open(path) as output:
        first = True
        for sentences in documents:
            lines = [" ".join(sentence.split()) for sentence in sentences]
            lines = [line for line in lines if line]
            if lines:
                output.write("" if first else "\n")
                output.write("\n".join(lines) + "\n")
                first = False


def corpus_statistics(path: Path) -> CorpusStatistics:
    """Counts documents, sentences and whitespace-separated words of a corpus file."""
    documents = sentences = words = 0
    in_document = False
    with open(path, encoding="utf-8") as corpus:
        for line in corpus:
            if line.strip():
                sentences += 1
                words += len(line.split())
                documents += not in_document
                in_document = True
            else:
                in_document = False
    return CorpusStatistics(documents, sentences, words, path.stat().st_size)


def _cached_corpus(file_name: str, documents: Callable[[], Iterable[Document]]) -> Path:
    path = assets.cache_dir() / "corpora" / file_name
    if not path.is_file():
        write_corpus(documents(), path)
    return path


def _wheel_member(member: str) -> bytes:
    wheel = assets.fetch_package_archive(*GENSIM_PACKAGE)
    with zipfile.ZipFile(wheel) as archive:
        try:
            return archive.read(member)
        except KeyError:
            raise RuntimeError(f"{wheel.name} holds no member {member!r}") from None


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The command's flags, defined only when it runs as a program."""
    flags.DEFINE_enum("corpus", "all", ["wikipedia", "news", "all"],
                      "Which built-in corpus to fetch and describe.", flag_values=flag_values)


def main(argv: list[str], values: flags.FlagValues = flags.FLAGS) -> None:
    program.check_no_arguments(argv)
    builders = {"wikipedia": wikipedia_sample_path, "news": news_sample_path}
    for name, build in builders.items():
        if values.corpus in (name, "all"):
            path = build()
            print(f"{name}: {path}: {corpus_statistics(path)}")


if __name__ == "__main__":
    program.run_command(define_flags, main, __name__)
