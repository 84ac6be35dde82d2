"""Span logits of every window -> answer texts, n-best lists and v2 null odds.

For each example, every window's `n_best_size` highest start and end
logits are paired; a pair is a candidate when it lies in the context part
of the window (not the question or padding), ends at or after its start,
is at most `max_answer_length` tokens long, and its start token has its
maximum context in this window (so a span is scored where the model saw
the most text around it). Candidates are ranked by start + end logit
across all windows.

Candidates are WordPiece spans, but answers must be spans of the original
context: "steve smith" is the tokenized form of "Steve Smith's" up to the
possessive. `get_final_text` finds the tokenized prediction in a
BasicTokenizer re-tokenization of the original words and maps its ends back
through both texts with spaces removed (where the characters correspond
one to one); when that alignment fails it keeps the whole original words.

SQuAD v2.0: the null answer is scored s_null = start_logit[CLS] +
end_logit[CLS], the lowest over the example's windows (the window most
sure that there is an answer), and the example is answered "" when
s_null - (best non-null score) exceeds `null_score_diff_threshold`; that
difference is written out as the null odds for the official script's
`--na-prob-file`. When no non-null candidate exists at all, the original
crashed; here the answer is "" and the null odds is s_null, as if against
the original's zero-scored stand-in entry (either way, "" is scored the
same by the official script whatever the odds).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np
import tensorflow as tf

from core.atomic import atomic_open
from data_prep.datasets.squad import SquadExample
from data_prep.datasets.squad_features import InputFeatures
from text import normalization

_BATCH = 4096


@dataclasses.dataclass
class RawResult:
    """The model's start and end logits over all positions of one window."""

    unique_id: int
    start_logits: Sequence[float]
    end_logits: Sequence[float]


@dataclasses.dataclass
class _Candidate:
    score: float
    start_logit: float
    end_logit: float
    feature: InputFeatures | None = None  # None: the null answer
    start: int = 0
    end: int = 0


def compute_predictions(examples: Sequence[SquadExample], features: Sequence[InputFeatures],
                        results: Sequence[RawResult], n_best_size: int, max_answer_length: int,
                        do_lower_case: bool, version_2_with_negative: bool,
                        null_score_diff_threshold: float = 0.0
                        ) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """(answer text, n-best list, null odds) per question id; null odds only for v2."""
    by_id = {result.unique_id: result for result in results}
    missing = [f.unique_id for f in features if f.unique_id not in by_id]
    if missing:
        raise ValueError(f"no model result for {len(missing)} features, e.g. unique_id "
                         f"{missing[0]}")
    by_example: dict[int, list[InputFeatures]] = defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    ranked = [_rank(by_example[index], by_id, n_best_size, max_answer_length,
                    version_2_with_negative) for index in range(len(examples))]
    words = _BasicWords(do_lower_case)
    words.prefetch(_span_texts(example, candidate)[1] for example, (candidates, _)
                   in zip(examples, ranked) for candidate in candidates[:n_best_size]
                   if candidate.feature is not None)
    predictions, nbest, null_odds = {}, {}, {}
    for example, (candidates, null) in zip(examples, ranked):
        entries = _nbest(example, candidates, null, n_best_size, words)
        nbest[example.qas_id] = entries
        if not version_2_with_negative:
            predictions[example.qas_id] = entries[0]["text"]
            continue
        best = next((entry for entry in entries if entry["text"]), None)
        s_null = null.score if null is not None else 0.0
        diff = s_null - best["start_logit"] - best["end_logit"] if best else s_null
        null_odds[example.qas_id] = diff
        answered = best is not None and diff <= null_score_diff_threshold
        predictions[example.qas_id] = best["text"] if answered else ""
    return predictions, nbest, null_odds


def _rank(features: list[InputFeatures], results: dict[int, RawResult], n_best_size: int,
          max_answer_length: int, version_2: bool
          ) -> tuple[list[_Candidate], _Candidate | None]:
    """(valid spans of all windows and the null answer (v2), best first; the null answer)."""
    candidates: list[_Candidate] = []
    null: _Candidate | None = None
    for feature in features:
        result = results[feature.unique_id]
        start_logits = np.asarray(result.start_logits, dtype=np.float64)
        end_logits = np.asarray(result.end_logits, dtype=np.float64)
        if version_2:
            score = float(start_logits[0] + end_logits[0])
            if null is None or score < null.score:
                null = _Candidate(score, float(start_logits[0]), float(end_logits[0]))
        for start in _top(start_logits, n_best_size, len(feature.tokens)):
            if not feature.token_is_max_context.get(start, False):
                continue
            for end in _top(end_logits, n_best_size, len(feature.tokens)):
                if (start in feature.token_to_orig_map and end in feature.token_to_orig_map
                        and start <= end < start + max_answer_length):
                    s, e = float(start_logits[start]), float(end_logits[end])
                    candidates.append(_Candidate(s + e, s, e, feature, start, end))
    if null is not None:
        candidates.append(null)  # after the spans: a tie in score keeps spans first
    candidates.sort(key=lambda c: c.score, reverse=True)
    return candidates, null


def _top(logits: np.ndarray, count: int, num_tokens: int) -> list[int]:
    """Positions of the `count` highest logits (lower position first on ties), within tokens."""
    best = np.argsort(-logits, kind="stable")[:count]
    return best[best < num_tokens].tolist()


def _span_texts(example: SquadExample, candidate: _Candidate) -> tuple[str, str]:
    """(the span's WordPiece text with "##" joins undone, the original words it covers)."""
    feature = candidate.feature
    pieces = " ".join(feature.tokens[candidate.start:candidate.end + 1])
    tokenized = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    first = feature.token_to_orig_map[candidate.start]
    last = feature.token_to_orig_map[candidate.end]
    return tokenized, " ".join(example.doc_tokens[first:last + 1])


def _nbest(example: SquadExample, candidates: list[_Candidate], null: _Candidate | None,
           n_best_size: int, words: _BasicWords) -> list[dict]:
    """The first `n_best_size` distinct answer texts; the null answer (v2) always kept."""
    chosen: list[tuple[str, _Candidate]] = []
    seen: set[str] = set()
    for candidate in candidates:
        if len(chosen) >= n_best_size:
            break
        if candidate.feature is None:
            text = ""
        else:
            tokenized, original = _span_texts(example, candidate)
            text = _align(tokenized, original, words.get(original))
        if text not in seen:
            seen.add(text)
            chosen.append((text, candidate))
    if null is not None and "" not in seen:
        chosen.append(("", null))
    if not chosen:  # v1 with no valid span: an empty answer rather than a crash
        chosen.append(("", _Candidate(0.0, 0.0, 0.0)))
    probabilities = _softmax([candidate.score for _, candidate in chosen])
    return [{"text": text, "probability": p, "start_logit": c.start_logit,
             "end_logit": c.end_logit} for (text, c), p in zip(chosen, probabilities)]


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


@functools.cache
def _joined_words(lower_case: bool) -> tf.types.experimental.PolymorphicFunction:
    """BasicTokenizer words joined by single spaces, as one traced graph per casing."""
    def run(texts: tf.Tensor) -> tf.Tensor:
        words = normalization.split_words(texts, lower_case)
        return tf.strings.reduce_join(words, axis=1, separator=" ")

    return tf.function(run, input_signature=[tf.TensorSpec([None], tf.string)])


class _BasicWords:
    """Texts re-tokenized by the BasicTokenizer, batched into few graph calls and cached.

    One call per text would cost a graph call per n-best entry; instead the
    likely texts of all examples are tokenized up front in large batches.
    """

    def __init__(self, lower_case: bool):
        self._cache: dict[str, str] = {}
        self._run = _joined_words(lower_case)

    def prefetch(self, texts: Iterable[str]) -> None:
        new = [text for text in dict.fromkeys(texts) if text not in self._cache]
        for begin in range(0, len(new), _BATCH):
            chunk = new[begin:begin + _BATCH]
            for text, joined in zip(chunk, self._run(tf.constant(chunk)).numpy().tolist()):
                self._cache[text] = joined.decode("utf-8")

    def get(self, text: str) -> str:
        """The BasicTokenizer words of `text`, joined by spaces."""
        if text not in self._cache:
            self.prefetch([text])
        return self._cache[text]


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """The part of `orig_text` that the tokenized `pred_text` stands for (else all of it)."""
    return _align(pred_text, orig_text, _BasicWords(do_lower_case).get(orig_text))


def _align(pred_text: str, orig_text: str, tokenized: str) -> str:
    """Projects `pred_text`, found in `tokenized`, back onto `orig_text`.

    `tokenized` is the BasicTokenizer's words of `orig_text` joined by
    spaces. Both texts are compared with spaces removed; this only works when they
    then have the same length (normalization changed no character count),
    so a character's position in one is its position in the other.
    """
    start = tokenized.find(pred_text)
    if start < 0 or not pred_text:
        return orig_text
    end = start + len(pred_text) - 1
    if (len(orig_text) - orig_text.count(" ") != len(tokenized) - tokenized.count(" ")
            or " " in (tokenized[start], tokenized[end])):
        return orig_text
    orig_positions = [i for i, char in enumerate(orig_text) if char != " "]
    # The rank of a character among the non-spaces is its position less the spaces before it.
    first = orig_positions[start - tokenized.count(" ", 0, start)]
    last = orig_positions[end - tokenized.count(" ", 0, end)]
    return orig_text[first:last + 1]


def write_prediction_files(output_dir: str, predictions: dict[str, str],
                           nbest: dict[str, list[dict]], null_odds: dict[str, float]
                           ) -> list[str]:
    """predictions.json, nbest_predictions.json and (v2, non-empty odds) null_odds.json.

    Each file is written to a temporary name and renamed, so a reader never
    sees half a file. Returns their paths.
    """
    os.makedirs(output_dir, exist_ok=True)
    outputs = {"predictions.json": predictions, "nbest_predictions.json": nbest}
    if null_odds:
        outputs["null_odds.json"] = null_odds
    for name, content in outputs.items():
        with atomic_open(os.path.join(output_dir, name)) as out:
            json.dump(content, out, indent=4)
            out.write("\n")
    return [os.path.join(output_dir, name) for name in outputs]
