"""Learns a WordPiece vocabulary from a corpus, laid out like Google's vocab.txt.

The corpus is the pre-training input format (one sentence per line, blank
lines between documents; blank lines do not matter here). Every line is
normalized and split into words by this project's own BasicTokenizer step
(`tokenization`), so the learned pieces match what `FullTokenizer` will
later look up; tensorflow-text's `bert_vocab_from_dataset` would split with
its own normalization (NFKC case folding), which differs from the original
BERT's on some characters. The word counts then go to tensorflow-text's
WordPiece learner (`wordpiece_tokenizer_learner_lib`).

The learner keeps a subword when it occurs at least `threshold` times and
searches for the threshold that gives the requested size. Its own search
bisects the threshold linearly from the most frequent word's count down,
spending a dozen full learning passes far above any useful value; here the
search bisects geometrically (the vocabulary size falls roughly with the
log of the threshold), which needs a handful (4 instead of 15 for a 30k
vocabulary on the built-in Wikipedia sample: 44 s instead of 200 s). The result never
exceeds `vocab_size`; a corpus too small to fill it gives a smaller one.

Layout of the written file (Google's uncased vocab with the defaults):
`[PAD]`, `[unused0]`..`[unused98]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`,
the remaining `[unused*]` slots, single characters, then learned pieces.

    python -m data_prep.vocab --input_file=corpus/*.txt --output_file=vocab.txt \
        --vocab_size=30522 --do_lower_case=true
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from typing import Iterable, Iterator, Mapping, Sequence

import tensorflow as tf
from absl import flags
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from core import program
from core.arguments import FieldError, FieldOSError
from core.atomic import atomic_open
from data_prep.pretraining.shards import expand_inputs
from text.normalization import split_words
from text.text_files import read_utf8_lines

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_TOKEN = "[PAD]"
UNUSED_BEFORE_SPECIALS = 99  # Google's vocabularies put [UNK] at id 100
JOINER = "##"
MAX_TOKEN_LENGTH = 50
MAX_UNIQUE_CHARS = 1000
NUM_ITERATIONS = 4
SLACK = 0.05  # a pass giving up to 5% more pieces than needed ends the search
LINES_PER_BATCH = 4096

_log = logging.getLogger(__name__)


def reserved_tokens(num_unused: int) -> list[str]:
    """[PAD], up to 99 [unused*], [UNK] [CLS] [SEP] [MASK], then the other [unused*]."""
    if num_unused < 0:
        raise FieldError("{num_unused} must be >= 0, got {0}", num_unused)
    unused = [f"[unused{index}]" for index in range(num_unused)]
    split = min(num_unused, UNUSED_BEFORE_SPECIALS)
    return [PAD_TOKEN, *unused[:split], *SPECIAL_TOKENS, *unused[split:]]


def expand_input_patterns(input_file: str) -> list[str]:
    """Files matching a comma-separated list of globs; each glob must match something."""
    patterns = [pattern.strip() for pattern in input_file.split(",") if pattern.strip()]
    if not patterns:
        raise FieldError("{input_file} is empty: give comma-separated globs of corpus files")
    return expand_inputs(patterns)


def count_words(files: Sequence[str], do_lower_case: bool) -> collections.Counter:
    """Frequency of every word the original BasicTokenizer makes of the corpus lines.

    Raises ValueError naming `file:line` for bytes that are not UTF-8, and
    when the files hold no words at all.
    """
    split = tf.function(lambda lines: split_words(lines, do_lower_case).flat_values)
    counts: collections.Counter = collections.Counter()
    for batch in _line_batches(files):
        counts.update(split(tf.constant(batch)).numpy())
    if not counts:
        raise ValueError(f"the input files hold no words: {', '.join(files)}")
    return collections.Counter({word.decode("utf-8"): count for word, count in counts.items()})


def _line_batches(files: Iterable[str]) -> Iterator[list[str]]:
    batch = []
    for path in files:
        for line in read_utf8_lines(path):
            if line.strip():
                batch.append(line)
                if len(batch) == LINES_PER_BATCH:
                    yield batch
                    batch = []
    if batch:
        yield batch


def learn_vocabulary(word_counts: Mapping[str, int], vocab_size: int, num_unused: int = 994,
                     min_count: int = 1) -> list[str]:
    """The whole vocabulary, reserved tokens first, at most `vocab_size` entries.

    `word_counts` maps each (already normalized) word to its frequency.
    Every character kept by the learner appears both alone and as a `##`
    suffix, so any word made of those characters can be tokenized.
    """
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise FieldError("{vocab_size}={0} leaves no room for learned tokens after the {1} "
                         "reserved tokens ([PAD], specials, {2} [unused])", vocab_size,
                         len(reserved), num_unused)
    if min_count < 1:
        raise FieldError("{min_count} must be >= 1, got {0}", min_count)
    words = learner.get_input_words(list(word_counts.items()), reserved, MAX_TOKEN_LENGTH)
    if not words:
        raise ValueError("the corpus holds no words to learn a vocabulary from")
    allowed = learner.get_allowed_chars(words, MAX_UNIQUE_CHARS)
    words = learner.filter_input_words(words, allowed, -1)
    chars = sorted(learner.extract_char_tokens(words))
    room = vocab_size - len(reserved) - 2 * len(chars)
    if room < 0:
        raise FieldError("{vocab_size}={0} is too small: the {1} reserved tokens and the "
                         "corpus's {2} characters (each also as a ##suffix) need {3} entries",
                         vocab_size, len(reserved), len(chars), len(reserved) + 2 * len(chars))
    pieces = _search_threshold(words, set(chars), room, min_count) if room else []
    return [*reserved, *chars, *pieces[:room], *(JOINER + char for char in chars)]


def _search_threshold(words: list[tuple[str, int]], chars: set[str], room: int,
                      min_count: int) -> list[str]:
    """Learned multi-character pieces from the highest count threshold that fills `room`.

    Bisects the threshold geometrically; stops early once a pass gives
    between `room` and `room * (1 + SLACK)` pieces. Where even `min_count`
    cannot fill the room, the largest vocabulary found is returned.
    """
    low, high = min_count, max(min_count, max(count for _, count in words))
    filling, largest = None, []
    while low <= high:
        threshold = min(high, max(low, round(math.sqrt(low * high))))
        started = time.perf_counter()
        pieces = _pieces_at(words, chars, threshold)
        _log.info("threshold %d: %d learned pieces for %d places (%.1f s)", threshold,
                     len(pieces), room, time.perf_counter() - started)
        if len(pieces) >= room:
            filling = pieces
            if len(pieces) <= room * (1 + SLACK):
                break
            low = threshold + 1
        else:
            largest = max(largest, pieces, key=len)
            high = threshold - 1
    if filling is None:
        _log.warning("the corpus fills only %d of %d places for learned pieces at "
                        "min_count=%d", len(largest), room, min_count)
    return filling if filling is not None else largest


def _pieces_at(words: list[tuple[str, int]], chars: set[str], threshold: int) -> list[str]:
    """One run of tensorflow-text's learner; its pieces by falling count, characters left out."""
    params = learner.Params(
        upper_thresh=None, lower_thresh=None, num_iterations=NUM_ITERATIONS,
        max_input_tokens=-1, max_token_length=MAX_TOKEN_LENGTH,
        max_unique_chars=MAX_UNIQUE_CHARS, vocab_size=None, slack_ratio=SLACK,
        include_joiner_token=True, joiner=JOINER, reserved_tokens=[])
    vocab = learner.learn_with_thresh(words, threshold, params)
    return [token for token in vocab
            if token not in chars and token.removeprefix(JOINER) not in chars]


def write_vocab(tokens: Sequence[str], output_file: str) -> None:
    """Writes one token per line under a temporary name, then renames it into place."""
    try:
        with atomic_open(output_file) as output:
            output.writelines(token + "\n" for token in tokens)
    except OSError as error:
        raise FieldOSError("{output_file} {0!r} cannot be written: {1}", output_file,
                           error) from None


def build_vocab_file(input_file: str, output_file: str, vocab_size: int, do_lower_case: bool,
                     num_unused: int = 994, min_count: int = 1) -> list[str]:
    """Counts the words of the files matching `input_file`, learns, writes `output_file`."""
    if not output_file:
        raise FieldError("{output_file} is required: the vocab.txt to write")
    files = expand_input_patterns(input_file)
    output_dir = os.path.dirname(os.path.abspath(output_file))
    if not os.access(output_dir, os.W_OK):
        raise FieldOSError("{output_file} {0!r}: folder {1!r} is missing or not writable",
                           output_file, output_dir)
    started = time.perf_counter()
    counts = count_words(files, do_lower_case)
    _log.info("%d files: %d words, %d distinct (%.1f s)", len(files), sum(counts.values()),
              len(counts), time.perf_counter() - started)
    tokens = learn_vocabulary(counts, vocab_size, num_unused, min_count)
    write_vocab(tokens, output_file)
    _log.info("wrote %d tokens to %s (%.1f s in all)", len(tokens), output_file,
              time.perf_counter() - started)
    return tokens


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The command's flags, defined only when it runs as a program."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("input_file", None, "Comma-separated globs of corpus files (one "
                        "sentence per line).", **into)
    flags.DEFINE_string("output_file", None, "vocab.txt to write.", **into)
    flags.DEFINE_integer("vocab_size", 30522, "Entries in the vocabulary, reserved tokens "
                         "included.", **into)
    flags.DEFINE_bool("do_lower_case", True, "true: lowercase and strip accents (uncased "
                      "model); false: cased.", **into)
    flags.DEFINE_integer("num_unused", 994, "[unused*] slots; the first 99 precede [UNK] as "
                         "in Google's vocab.", **into)
    flags.DEFINE_integer("min_count", 1, "Lowest count threshold the learner may go down to.",
                         **into)


def main(argv: list[str], values: flags.FlagValues = flags.FLAGS) -> None:
    program.check_no_arguments(argv)
    build_vocab_file(values.input_file or "", values.output_file or "", values.vocab_size,
                     values.do_lower_case, values.num_unused, values.min_count)


if __name__ == "__main__":
    program.run_command(define_flags, main, __name__)
