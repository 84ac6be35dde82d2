"""BERT pre-training instances: documents -> segment pairs -> masked, serialized tf.train.Examples.

The decisions follow the original google-research/bert algorithm (see
`segment_spans`), but the representation does not. The original builds each
instance as Python lists of token strings and masks, pads and serializes it
one token at a time, which is where most of its time goes. Here the tokens of
a whole chunk of documents live in one flat id array, an instance is five
integers (the token ranges of its two segments and its label), and padding,
masking and protobuf encoding run on thousands of instances at once in numpy.

Departures from the original, all deliberate:
- `masked_lm_prob=0` gives no predictions at all (the original still masked
  one token), for the left-to-right LM ablation;
- `next_sentence=False` (`--no_nsp`) makes one segment `[CLS] A [SEP]` of
  consecutive sentences, label 0, for the "No NSP" ablation;
- truncation draws how many tokens come off the front of each segment from
  the binomial distribution the original's one-coin-per-token loop follows;
- a whole word never spans `[SEP]`: a "##" piece that starts a truncated
  segment is a word of its own rather than part of the other segment's last word.

Nothing here needs TensorFlow: input comes as numpy arrays and output as bytes.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import numpy as np

from core.arguments import FieldError
from text.sentence_pairs import layout_rows

RANDOM_NEXT_TRIES = 10  # the original gives up looking for another document after 10 draws
# A line is one sentence: one this many sequences long is mostly cut away (a text on one line).
LONG_LINE_SEQUENCES = 10


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """What an instance looks like; the field names are the command line's flag names.

    `mask_ratios` are the shares of masked positions that become [MASK], a
    random token and stay unchanged, in that order (the paper's Table 8).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    mask_ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)
    do_whole_word_mask: bool = False
    next_sentence: bool = True

    def __post_init__(self):
        problems = []  # templates of core.arguments.FieldError; the values are numbers
        if self.max_seq_length < 5:
            problems.append(f"{{max_seq_length}}={self.max_seq_length} must be at least 5 "
                            "([CLS], two one-token segments, two [SEP])")
        if not 0 <= self.max_predictions_per_seq <= self.max_seq_length:
            problems.append(f"{{max_predictions_per_seq}}={self.max_predictions_per_seq} must "
                            f"lie in [0, {{max_seq_length}}={self.max_seq_length}]")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            problems.append(f"{{masked_lm_prob}}={self.masked_lm_prob} must lie in [0, 1]")
        elif self.masked_lm_prob > 0 and self.max_predictions_per_seq == 0:
            problems.append("{max_predictions_per_seq}=0 leaves no room for predictions; "
                            "use {masked_lm_prob}=0 for unmasked sequences")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            problems.append(f"{{short_seq_prob}}={self.short_seq_prob} must lie in [0, 1]")
        if self.dupe_factor < 1:
            problems.append(f"{{dupe_factor}}={self.dupe_factor} must be at least 1")
        ratios = self.mask_ratios
        if len(ratios) != 3 or min(ratios) < 0 or abs(sum(ratios) - 1.0) > 1e-6:
            problems.append(f"{{mask_ratios}}={','.join(map(str, ratios))} must be three "
                            "non-negative shares ([MASK], random, unchanged) summing to 1")
        if problems:
            raise FieldError("; ".join(problems))

    @property
    def inserts_mask(self) -> bool:
        """Whether any position becomes [MASK]: only then must the vocabulary hold it."""
        return self.masked_lm_prob > 0 and self.mask_ratios[0] > 0

    @property
    def long_line_tokens(self) -> int:
        """Lines longer than this are counted and warned about: they cannot be used whole."""
        return LONG_LINE_SEQUENCES * self.max_seq_length

    @property
    def max_num_tokens(self) -> int:
        """Room for segment tokens once [CLS] and the [SEP]s are in."""
        return self.max_seq_length - (3 if self.next_sentence else 2)


@dataclasses.dataclass(frozen=True)
class VocabIds:
    """The ids masking needs, and which vocabulary entries continue a word ("##...")."""

    cls_id: int
    sep_id: int
    mask_id: int  # -1 for a vocabulary without [MASK], used where nothing becomes [MASK]
    continues_word: np.ndarray  # bool [vocab_size]

    @classmethod
    def from_tokens(cls, tokens: Sequence[str]) -> "VocabIds":
        index = {token: i for i, token in enumerate(tokens)}
        return cls(index["[CLS]"], index["[SEP]"], index.get("[MASK]", -1),
                   np.array([token.startswith("##") for token in tokens], dtype=bool))

    @property
    def vocab_size(self) -> int:
        return len(self.continues_word)


def chunk_bounds(row_splits: np.ndarray,
                 document_starts: Sequence[int]) -> tuple[list[int], list[int], int]:
    """Document and sentence bounds for `segment_spans` from tokenized lines.

    `row_splits` are the token offsets of each line in the flat id array and
    `document_starts` the first line of each document. Lines without tokens
    are dropped, as the original did, and so are documents left without a
    line; the third value counts those documents.
    """
    row_splits = np.asarray(row_splits, dtype=np.int64)
    has_tokens = row_splits[1:] > row_splits[:-1]
    sentence_bounds = np.append(row_splits[:-1][has_tokens], row_splits[-1])
    sentences_before_line = np.concatenate([[0], np.cumsum(has_tokens)])
    line_bounds = np.append(np.asarray(document_starts, dtype=np.int64), len(has_tokens))
    document_bounds = np.unique(sentences_before_line[line_bounds])
    empty_documents = len(document_starts) - (len(document_bounds) - 1)
    return document_bounds.tolist(), sentence_bounds.tolist(), empty_documents


def segment_spans(document_bounds: Sequence[int], sentence_bounds: Sequence[int],
                  options: InstanceOptions, rng: random.Random) -> np.ndarray:
    """All instances of `dupe_factor` passes over the documents, shuffled: int64 [N, 5].

    Sentence `s` holds tokens `sentence_bounds[s]:sentence_bounds[s + 1]`
    (non-empty) and document `d` sentences `document_bounds[d]:document_bounds[d + 1]`
    (at least one). Each row is `a_start, a_stop, b_start, b_stop,
    is_random_next` in token offsets; without next-sentence pairs B is empty.

    Per document and pass, as the original: aim at `max_num_tokens`, or with
    probability `short_seq_prob` at a length drawn from [2, max_num_tokens];
    gather whole sentences until the aim is reached or the document ends; A is
    the first 1..n-1 of them. B is the rest, or with probability 1/2 (always
    when there is one sentence) consecutive sentences from a random place in
    another document, long enough for the aim, and the sentences after A go
    back to this document for its next instance. The longer segment then loses
    tokens until the pair fits, each from its front or back at random.
    """
    spans: list[int] = []  # five values per instance
    for _ in range(options.dupe_factor):
        for document in range(len(document_bounds) - 1):
            _document_spans(document, document_bounds, sentence_bounds, options, rng, spans)
    spans_array = np.array(spans, dtype=np.int64).reshape(-1, 5)
    return spans_array[np.random.default_rng(rng.getrandbits(64)).permutation(len(spans_array))]


def _document_spans(document: int, document_bounds: Sequence[int], bounds: Sequence[int],
                    options: InstanceOptions, rng: random.Random,
                    spans: list[int]) -> None:
    max_tokens = options.max_num_tokens
    target = max_tokens
    if rng.random() < options.short_seq_prob:
        target = _uniform_int(rng, 2, max_tokens)
    start, stop = document_bounds[document], document_bounds[document + 1]
    sentence = start  # the last sentence gathered so far; `start` is the first
    while sentence < stop:
        if sentence + 1 < stop and bounds[sentence + 1] - bounds[start] < target:
            sentence += 1
            continue
        gathered = sentence + 1 - start
        if not options.next_sentence:
            spans += _truncated(bounds[start], bounds[sentence + 1], 0, 0, 0, max_tokens, rng)
        else:
            a_stop = start + (_uniform_int(rng, 1, gathered - 1) if gathered > 1 else 1)
            if gathered == 1 or rng.random() < 0.5:
                wanted = target - (bounds[a_stop] - bounds[start])
                b_start, b_stop = _random_segment(document, wanted, document_bounds, bounds, rng)
                spans += _truncated(bounds[start], bounds[a_stop], b_start, b_stop, 1,
                                    max_tokens, rng)
                sentence = a_stop - 1  # unused sentences are put back
            else:
                spans += _truncated(bounds[start], bounds[a_stop], bounds[a_stop],
                                    bounds[sentence + 1], 0, max_tokens, rng)
        sentence += 1
        start = sentence


def _random_segment(document: int, wanted: int, document_bounds: Sequence[int],
                    bounds: Sequence[int], rng: random.Random) -> tuple[int, int]:
    """Token range of consecutive sentences of a random other document, `wanted` long if it can."""
    last_document = len(document_bounds) - 2
    for _ in range(RANDOM_NEXT_TRIES):
        other = _uniform_int(rng, 0, last_document)
        if other != document:
            break
    stop = document_bounds[other + 1]
    sentence = _uniform_int(rng, document_bounds[other], stop - 1)
    first = bounds[sentence]
    while sentence + 1 < stop and bounds[sentence + 1] - first < wanted:
        sentence += 1
    return first, bounds[sentence + 1]


def _uniform_int(rng: random.Random, low: int, high: int) -> int:
    """Like `rng.randint(low, high)`, five times faster (bias below 2**-30 for these ranges)."""
    return low + int(rng.random() * (high - low + 1))


def _truncated(a_start: int, a_stop: int, b_start: int, b_stop: int, label: int,
               max_tokens: int, rng: random.Random) -> tuple[int, int, int, int, int]:
    """The pair cut to `max_tokens` as the original's loop does, in closed form.

    The loop takes a token from the longer segment (B on a tie) until the
    pair fits, from its front or back by a fair coin. So the longer one is cut
    down to the other's length, the rest alternates B, A, B, ..., and the
    number of front cuts per segment is binomial(cuts, 1/2).
    """
    a_length, b_length = a_stop - a_start, b_stop - b_start
    excess = a_length + b_length - max_tokens
    if excess <= 0:
        return a_start, a_stop, b_start, b_stop, label
    a_cuts = min(excess, max(a_length - b_length, 0))
    b_cuts = min(excess - a_cuts, max(b_length - a_length, 0))
    rest = excess - a_cuts - b_cuts
    a_cuts += rest // 2
    b_cuts += rest - rest // 2
    a_front = bin(rng.getrandbits(a_cuts)).count("1") if a_cuts else 0
    b_front = bin(rng.getrandbits(b_cuts)).count("1") if b_cuts else 0
    return (a_start + a_front, a_stop - (a_cuts - a_front), b_start + b_front,
            b_stop - (b_cuts - b_front), label)


def build_features(token_ids: np.ndarray, spans: np.ndarray, options: InstanceOptions,
                   vocab: VocabIds, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The padded, masked model inputs of `spans` (rows of `segment_spans`) over `token_ids`.

    Returns the features of `core.record_schema.pretraining_record_schema`
    (input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
    masked_lm_weights, next_sentence_labels), one row per span.
    """
    spans = spans.astype(np.int32)  # offsets within a chunk; half the memory traffic of int64
    a_start, a_stop, b_start, b_stop, labels = (spans[:, k:k + 1] for k in range(5))
    input_ids, input_mask, segment_ids, in_text = layout_rows(
        token_ids, a_start, a_stop - a_start, b_start, b_stop - b_start, options.next_sentence,
        options.max_seq_length, vocab.cls_id, vocab.sep_id)
    length = input_mask.sum(axis=1, keepdims=True)

    if options.masked_lm_prob > 0:
        select = _select_words if options.do_whole_word_mask else _select_tokens
        wanted = np.minimum(options.max_predictions_per_seq,
                            np.maximum(1, np.rint(length[:, 0] * options.masked_lm_prob)))
        positions, used = select(input_ids, in_text, wanted.astype(np.int64), options, vocab, rng)
    else:
        positions = np.zeros((len(spans), options.max_predictions_per_seq), dtype=np.int64)
        used = positions.astype(bool)
    masked_ids = np.where(used, np.take_along_axis(input_ids, positions, axis=1), 0)
    draw = rng.random(positions.shape)
    mask_share, random_share, _ = options.mask_ratios
    replacement = np.where(draw < mask_share, vocab.mask_id,
                           np.where(draw < mask_share + random_share,
                                    rng.integers(0, vocab.vocab_size, positions.shape),
                                    masked_ids))
    input_ids[np.nonzero(used)[0], positions[used]] = replacement[used]
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "masked_lm_positions": positions, "masked_lm_ids": masked_ids,
            "masked_lm_weights": used.astype(np.float32), "next_sentence_labels": labels}


def _select_tokens(input_ids: np.ndarray, candidates: np.ndarray, wanted: np.ndarray,
                   options: InstanceOptions, vocab: VocabIds,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`wanted` random candidate positions per row (fewer if there are fewer), sorted."""
    keys = np.where(candidates, rng.random(candidates.shape), 2.0)
    most = options.max_predictions_per_seq
    if most < keys.shape[1]:  # the `most` smallest keys, then those in key order
        smallest = np.argpartition(keys, most - 1, axis=1)[:, :most]
        chosen = np.take_along_axis(smallest, np.argsort(
            np.take_along_axis(keys, smallest, axis=1), axis=1), axis=1)
    else:
        chosen = np.argsort(keys, axis=1)
    count = np.minimum(wanted, candidates.sum(axis=1))
    used = np.arange(chosen.shape[1])[None, :] < count[:, None]
    return _sorted_positions(np.where(used, chosen, options.max_seq_length), options)


def _select_words(input_ids: np.ndarray, candidates: np.ndarray, wanted: np.ndarray,
                  options: InstanceOptions, vocab: VocabIds,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Whole words in random order, each taken only if all its pieces still fit, as the original."""
    follows_candidate = np.zeros_like(candidates)
    follows_candidate[:, 1:] = candidates[:, :-1]
    starts_word = candidates & ~(vocab.continues_word[input_ids] & follows_candidate)
    # A word is a start and the "##" candidates right after it; rows begin with [CLS].
    word_rows, word_starts = np.nonzero(starts_word)
    word_sizes = np.bincount(np.cumsum(starts_word[candidates]) - 1, minlength=len(word_rows))
    order = np.lexsort((rng.random(len(word_rows)), word_rows))  # by row, shuffled within
    row_offsets = np.searchsorted(word_rows, np.arange(len(input_ids) + 1)).tolist()
    order, word_starts, word_sizes = order.tolist(), word_starts.tolist(), word_sizes.tolist()
    chosen = np.full((len(input_ids), options.max_predictions_per_seq), options.max_seq_length)
    for row, budget in enumerate(wanted.tolist()):
        picked: list[int] = []
        for word in order[row_offsets[row]:row_offsets[row + 1]]:
            if len(picked) >= budget:
                break
            if len(picked) + word_sizes[word] <= budget:
                picked += range(word_starts[word], word_starts[word] + word_sizes[word])
        chosen[row, :len(picked)] = picked
    return _sorted_positions(chosen, options)


def _sorted_positions(chosen: np.ndarray,
                      options: InstanceOptions) -> tuple[np.ndarray, np.ndarray]:
    """Ascending positions, unused slots (marked max_seq_length) last and set to 0."""
    chosen = np.sort(chosen, axis=1)
    used = chosen < options.max_seq_length
    return np.where(used, chosen, 0), used
