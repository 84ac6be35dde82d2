"""CoNLL-2003 named-entity data: files -> sentences -> WordPiece windows -> tags per word.

BERT tags words, but the encoder sees WordPiece sub-tokens. As in the
paper (Section 5.3), each word's label sits on its FIRST sub-token and the
others get no label (the "X" of the first arXiv version's Section 4.3), so
a word is classified once whatever its length. Label id -1 marks every position
without a label ([CLS], [SEP], padding, continuation pieces, context);
models mask their loss with `label_ids >= 0`.

Section 5.3 of the paper feeds "maximal document context", which users who
rebuilt NER without it found worth about a point of F1. With
`document_context=True` the neighbouring sentences of the same document
fill the window around the target sentence, half on each side where the
document allows; they are read but never scored.

A sentence longer than the window is never truncated: it is covered by
overlapping windows, and each word is scored in exactly one of them, the
one where its first sub-token has the most context on its shorter side
(SQuAD's "max context" rule in the original run_squad.py, shared through
`text.sliding_windows`), since a word near a window edge is
tagged with half its context missing.

This module does not import TensorFlow; the tokenizer it is handed does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import numpy as np
from absl import logging

from core.arguments import FieldError
from core.atomic import atomic_open
from core.record_schema import ENCODER_INPUTS
from text.sentence_pairs import pack_ids
from text.sliding_windows import max_context_owners, windows
from text.tag_schemes import opens_with_inside
from text.text_files import read_utf8_lines

if TYPE_CHECKING:
    from text.tokenization import FullTokenizer

DOCSTART = "-DOCSTART-"
# The files of a CoNLL-2003 folder, by split: the names most copies use, then the shared
# task's own (eng.testa is the validation split, eng.testb the test split).
SPLIT_FILES = {"train": ("train.txt", "eng.train"), "valid": ("valid.txt", "dev.txt", "eng.testa"),
               "test": ("test.txt", "eng.testb")}
NO_LABEL = -1


@dataclass
class Sentence:
    """One sentence's words and gold tags; `source` is `file:line` of its first token."""

    words: list[str]
    tags: list[str]
    document_index: int
    source: str
    columns: int = 0  # columns of its file's token lines (0: not read from a file)

    def word_source(self, index: int) -> str:
        """`file:line` of word `index`: a sentence's token lines follow one another."""
        path, _, line = self.source.rpartition(":")
        return f"{path}:{int(line) + index}"


@dataclass
class Window:
    """One encoder input; `word_positions[k]` is where word k is scored here, or -1."""

    sentence_index: int
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    label_ids: list[int]
    word_positions: list[int]


def read_conll(path: str | os.PathLike, tag_column: int = -1) -> list[Sentence]:
    """Sentences of a CoNLL file: `TOKEN POS CHUNK TAG` (or `TOKEN TAG`) lines.

    Blank lines separate sentences; `-DOCSTART-` lines start a new document
    (documents are numbered from 0 in file order; a file without them is
    one document). Every token line must have as many columns as the first.
    Raises ValueError naming `file:line` for a malformed line, and naming
    the file when it holds no sentence at all.
    """
    path = str(path)
    skipped = {"docstart": 0}
    sentences = [Sentence([row[0] for row in rows], [row[tag_column] for row in rows],
                          document, source, len(rows[0]))
                 for document, source, rows in _blocks(path, tag_column, skipped)]
    if not sentences:
        raise ValueError(f"{path}: no sentences (the file is empty or holds only "
                         f"{DOCSTART} and blank lines)")
    _check_not_chunk_tags(sentences)
    logging.info("%s: read %d sentences, %d tokens in %d document(s); skipped %d %s line(s)",
                 path, len(sentences), sum(len(sentence.words) for sentence in sentences),
                 sentences[-1].document_index + 1, skipped["docstart"], DOCSTART)
    return sentences


# CoNLL-2000 phrase types: what the third column of `TOKEN POS CHUNK TAG` holds.
CHUNK_TYPES = frozenset({"NP", "VP", "PP", "ADJP", "ADVP", "SBAR", "PRT", "INTJ", "CONJP",
                         "LST", "UCP"})


def _check_not_chunk_tags(sentences: Sequence[Sentence]) -> None:
    """Refuses a file whose tag column holds only chunk tags: `TOKEN POS CHUNK` without NER.

    Trained on, such a file teaches chunking and scores it as entities, with
    an F1 near 1.0 and nothing said.
    """
    types = {tag[2:] for sentence in sentences for tag in sentence.tags if tag != "O"}
    if not types or not types <= CHUNK_TYPES:
        return
    sentence, word = next((sentence, index) for sentence in sentences
                          for index, tag in enumerate(sentence.tags) if tag != "O")
    raise ValueError(f"{sentence.word_source(word)}: the tag column (column "
                     f"{sentence.columns} of {sentence.columns}) holds chunk tags "
                     f"({', '.join(sorted(types)[:4])}), no entity tags: the NER column is "
                     "missing; expected TOKEN POS CHUNK TAG or TOKEN TAG")


def check_entity_tags(sentences: Sequence[Sentence], training: bool) -> None:
    """Refuses a training file without a single entity tag; for a dev or test file, warns.

    Trained on tags that are all O, a tagger learns to answer O and scores
    an F1 of 0, with nothing said. A dev or test file may hold few entities
    or none (text to be tagged often carries O placeholders), so it is
    scored, with 0 wherever no entity can be counted (conlleval's
    convention), and a warning says why.

    Args:
      sentences: one file's sentences, as `read_conll` returns them.
      training: whether the tagger learns its labels from this file.
    """
    if not sentences or any(tag != "O" for sentence in sentences for tag in sentence.tags):
        return
    first = sentences[0]
    path = first.source.rpartition(":")[0]
    found = (f"all {sum(len(sentence.tags) for sentence in sentences)} tags of its "
             f"{len(sentences)} sentence(s) in the tag column (column {first.columns} of "
             f"{first.columns}) are O")
    if training:
        raise ValueError(f"{path}: no entity tag to learn from: {found}; a training file "
                         "needs B-TYPE / I-TYPE tags (TOKEN POS CHUNK TAG or TOKEN TAG)")
    logging.warning("%s: no entity tag: %s; entity precision, recall and F1 on it are 0 "
                    "(nothing to find), token accuracy still counts", path, found)


def read_splits(data_dir: str, names: Sequence[str]) -> dict[str, list[Sentence]]:
    """The named splits of a CoNLL folder (`SPLIT_FILES`), each file's tags checked.

    Files of different layouts are refused, blaming the one with fewer
    columns: a file missing a column has its tags read from another column
    (`TOKEN POS CHUNK` gives chunk tags), so the file with more columns is
    the complete one and the error names the other, at its first token line.
    """
    sentences = {}
    for name in names:
        paths = [os.path.join(data_dir, file) for file in SPLIT_FILES[name]]
        found = next((path for path in paths if os.path.exists(path)), None)
        if found is None:
            raise FileNotFoundError(f"{name} split: no file {' or '.join(paths)}")
        sentences[name] = read_conll(found)
    firsts = sorted((split[0] for split in sentences.values()), key=lambda s: s.columns)
    short, full = firsts[0], firsts[-1]
    if short.columns != full.columns:
        raise ValueError(f"{short.source}: {short.columns} columns per token line where "
                         f"{full.source.rpartition(':')[0]} has {full.columns}: is a column "
                         "missing? every file needs the same layout (TOKEN POS CHUNK TAG, "
                         "or TOKEN TAG)")
    for name, split in sentences.items():
        check_entity_tags(split, training=name == "train")
    return sentences


def check_labels(labels: Sequence[str]) -> None:
    """Refuses a tag set entity-level scoring cannot read: a label twice, or one not O,
    B-TYPE or I-TYPE."""
    if len(set(labels)) != len(labels):
        raise FieldError("{labels} lists a label twice: {0}", ",".join(labels))
    bad = [label for label in labels
           if label != "O" and (label[:2] not in ("B-", "I-") or len(label) < 3)]
    if bad:
        raise FieldError("{labels}: {0} are not O, B-TYPE or I-TYPE; entity-level scoring "
                         "needs IOB1 or IOB2 tags", ", ".join(bad))


def _blocks(path: str, tag_column: int,
            skipped: dict[str, int]) -> Iterator[tuple[int, str, list[list[str]]]]:
    """(document index, file:line, rows of columns) for each blank-line separated block.

    `-DOCSTART-` lines are not held to the column count, since converted
    files often keep the 4-column `-DOCSTART- -X- -X- O` above 2-column data;
    they are counted in `skipped["docstart"]`.
    """
    rows: list[list[str]] = []
    width, first_line, document, document_has_sentences = 0, 0, 0, False
    for number, line in enumerate(read_utf8_lines(path), start=1):
        columns = line.split()
        if not columns or columns[0] == DOCSTART:
            skipped["docstart"] += bool(columns)
            if rows:
                yield document, f"{path}:{first_line}", rows
                rows, document_has_sentences = [], True
            if columns and document_has_sentences:
                document, document_has_sentences = document + 1, False
            continue
        if not width:
            width = len(columns)
            if width < 2 or not -width <= tag_column < width or tag_column % width == 0:
                raise ValueError(f"{path}:{number}: {width} column(s) with tag column "
                                 f"{tag_column}; expected TOKEN [POS CHUNK] TAG")
        elif len(columns) != width:
            raise ValueError(f"{path}:{number}: {len(columns)} columns where the first token "
                             f"line has {width}: {line.strip()!r}")
        if not rows:
            first_line = number
        rows.append(columns)
    if rows:
        yield document, f"{path}:{first_line}", rows


def label_list(sentences: Sequence[Sentence]) -> list[str]:
    """The tags seen, sorted, with "O" first so it gets id 0 in every run."""
    tags = {tag for sentence in sentences for tag in sentence.tags}
    return sorted(tags, key=lambda tag: (tag != "O", tag))


def detect_scheme(sentences: Sequence[Sentence]) -> str:
    """IOB1 if some entity opens with an I- tag (as in the original CoNLL-2003 files), else IOB2."""
    for sentence in sentences:
        if any(opens_with_inside(previous, tag)
               for previous, tag in zip(["O"] + sentence.tags, sentence.tags)):
            return "IOB1"
    return "IOB2"


def build_windows(sentences: Sequence[Sentence], tokenizer: FullTokenizer, max_seq_length: int,
                  label_map: Mapping[str, int], document_context: bool = False,
                  stride: int | None = None) -> list[Window]:
    """`[CLS] tokens [SEP]` windows covering every sentence, each word scored exactly once.

    A sentence of more than `max_seq_length - 2` sub-tokens gets windows
    starting every `stride` sub-tokens (default: half a window). A sentence
    of no words (Python callers can build one; a file's blank lines never
    do) has nothing to score, so it gets no window: the skipped sentences
    are counted in a warning, and `predictions_to_tags` still gives each of
    them its empty tag list, so sentences and predictions stay aligned.
    Raises ValueError naming the tag's own `file:line` for a tag not in
    `label_map`.
    """
    capacity = max_seq_length - 2
    stride = max(capacity // 2, 1) if stride is None else stride
    if capacity < 1 or not 1 <= stride <= capacity:
        raise ValueError(f"need max_seq_length >= 3 and 1 <= stride <= max_seq_length - 2, "
                         f"got {max_seq_length} and {stride}")
    pieces = _word_pieces(sentences, tokenizer)
    token_ids = [[i for word in s.words for i in pieces[word]] for s in sentences]
    built, long_sentences = [], 0
    empty = [sentence.source for sentence in sentences if not sentence.words]
    if empty:
        logging.warning("%d sentence(s) without words skipped (nothing to tag), the first at "
                        "%s", len(empty), empty[0])
    for index, sentence in enumerate(sentences):
        if not sentence.words:
            continue
        labels = []
        for word, tag in enumerate(sentence.tags):
            if tag not in label_map:
                raise ValueError(f"{sentence.word_source(word)}: label {tag!r} not seen in "
                                 f"training (known: {', '.join(sorted(label_map))})")
            labels.append(label_map[tag])
        starts = np.cumsum([0] + [len(pieces[word]) for word in sentence.words[:-1]])
        left, right = ((_context(sentences, token_ids, index, -1, capacity),
                        _context(sentences, token_ids, index, 1, capacity))
                       if document_context else ([], []))
        stream = left + token_ids[index] + right
        positions = (len(left) + starts).tolist()
        spans = _spans(len(token_ids[index]), len(left), len(stream), capacity, stride)
        owners = max_context_owners([(begin, end - begin) for begin, end in spans], len(stream))
        owner = owners[positions].tolist()
        packed = pack_ids([stream[begin:end] for begin, end in spans], [None] * len(spans),
                          max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
        for number, (begin, _) in enumerate(spans):
            built.append(_window(index, packed, number, begin, positions, owner, labels))
        long_sentences += len(spans) > 1
    if long_sentences:
        logging.info("%d of %d sentences are longer than one window (%d sub-tokens): read "
                     "through overlapping windows, none truncated; %d windows in all",
                     long_sentences, len(sentences), capacity, len(built))
    return built


def _word_pieces(sentences: Sequence[Sentence], tokenizer: FullTokenizer) -> dict[str, list[int]]:
    """Sub-token ids of every distinct word, in one batched call; [UNK] for a word with none."""
    words = list(dict.fromkeys(word for sentence in sentences for word in sentence.words))
    if not words:
        return {}
    ids, _ = tokenizer.tokenize_batch(words)
    flat, splits = ids.flat_values.numpy().tolist(), ids.row_splits.numpy().tolist()
    unk = [tokenizer.vocab["[UNK]"]]
    return {word: flat[splits[k]:splits[k + 1]] or unk for k, word in enumerate(words)}


def _context(sentences: Sequence[Sentence], token_ids: list[list[int]], index: int,
             direction: int, limit: int) -> list[int]:
    """Up to `limit` sub-tokens of the same document just before (-1) or after (+1) a sentence."""
    gathered: list[int] = []
    document, neighbour = sentences[index].document_index, index + direction
    while (len(gathered) < limit and 0 <= neighbour < len(sentences)
           and sentences[neighbour].document_index == document):
        ids = token_ids[neighbour]
        gathered = ids + gathered if direction < 0 else gathered + ids
        neighbour += direction
    return gathered[-limit:] if direction < 0 else gathered[:limit]


def _spans(length: int, offset: int, total: int, capacity: int,
           stride: int) -> list[tuple[int, int]]:
    """[begin, end) over the stream for each window of a sentence at `offset` in it.

    Cores are the sliding windows over the sentence; each is then widened
    to `capacity` with the stream's tokens on both sides, balanced, so short
    sentences and the last core of a long one see as much context as fits.
    """
    spans = []
    # (a sentence without sub-tokens still gets a window, of context only)
    for core_begin, core_length in windows(length, capacity, stride) or [(0, 0)]:
        core_end = core_begin + core_length
        room = capacity - core_length
        before, after = offset + core_begin, total - offset - core_end
        take_after = min(after, room - min(before, room // 2))
        take_before = min(before, room - take_after)
        spans.append((offset + core_begin - take_before, offset + core_end + take_after))
    return spans


def _window(sentence_index: int, packed: dict[str, np.ndarray], number: int, begin: int,
            positions: list[int], owner: list[int], labels: list[int]) -> Window:
    label_ids = [NO_LABEL] * packed["input_ids"].shape[1]
    word_positions = []
    for word, position in enumerate(positions):
        scored_here = owner[word] == number
        word_positions.append(1 + position - begin if scored_here else -1)
        if scored_here:
            label_ids[1 + position - begin] = labels[word]
    return Window(sentence_index, packed["input_ids"][number].tolist(),
                  packed["input_mask"][number].tolist(),
                  packed["segment_ids"][number].tolist(), label_ids, word_positions)


def windows_to_arrays(windows: Sequence[Window]) -> dict[str, np.ndarray]:
    """input_ids, input_mask, segment_ids, label_ids as int32 [windows, max_seq_length]."""
    if not windows:
        raise ValueError("no windows to stack")
    return {name: np.asarray([getattr(window, name) for window in windows], dtype=np.int32)
            for name in (*ENCODER_INPUTS, "label_ids")}


def predictions_to_tags(windows: Sequence[Window], logits_or_ids: np.ndarray,
                        sentences: Sequence[Sentence],
                        id_to_label: Mapping[int, str] | Sequence[str]) -> list[list[str]]:
    """One predicted tag per word, read at its first sub-token in the window that scores it.

    `logits_or_ids` is [windows, max_seq_length, labels] (argmax taken) or
    [windows, max_seq_length] label ids, in the order of `windows`.
    """
    predicted = np.asarray(logits_or_ids)
    if predicted.ndim == 3:
        predicted = predicted.argmax(axis=-1)
    if predicted.ndim != 2 or predicted.shape[0] != len(windows):
        raise ValueError(f"predictions of shape {np.shape(logits_or_ids)} for {len(windows)} "
                         "windows; expected [windows, max_seq_length(, labels)]")
    tags: list[list[str | None]] = [[None] * len(sentence.words) for sentence in sentences]
    for window, row in zip(windows, predicted):
        for word, position in enumerate(window.word_positions):
            if position >= 0:
                tags[window.sentence_index][word] = id_to_label[int(row[position])]
    for sentence, sentence_tags in zip(sentences, tags):
        if None in sentence_tags:
            raise ValueError(f"{sentence.source}: word {sentence_tags.index(None)} is scored in "
                             "no window; were the windows built from these sentences?")
    return tags  # type: ignore[return-value]


def write_conll_predictions(path: str | os.PathLike, sentences: Sequence[Sentence],
                            predicted_tags: Sequence[Sequence[str]]) -> None:
    """`TOKEN GOLD PRED` lines, a blank line after each sentence: conlleval's input layout.

    Written under a temporary name in the same folder and renamed into
    place, so an interrupted run never leaves a truncated file behind.
    """
    if len(predicted_tags) != len(sentences):
        raise ValueError(f"{len(predicted_tags)} predicted sequences for {len(sentences)} "
                         "sentences")
    lines = []
    for sentence, predicted in zip(sentences, predicted_tags):
        if len(predicted) != len(sentence.words):
            raise ValueError(f"{sentence.source}: {len(predicted)} predicted tags for "
                             f"{len(sentence.words)} words")
        lines.extend(f"{word} {gold} {guess}\n"
                     for word, gold, guess in zip(sentence.words, sentence.tags, predicted))
        lines.append("\n")
    with atomic_open(path, newline="\n") as output:
        output.writelines(lines)
