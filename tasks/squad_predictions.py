"""Span logits of every window -> answer texts, n-best lists and v2 null odds.

Each window's candidate spans are those of `text.answer_spans` (the
`n_best_size` best starts and ends paired, inside the context, at most
`max_answer_length` tokens, started where the start token has its maximum
context); candidates are ranked by start + end logit across all windows,
and each answer's text is the original's `get_final_text` of its span
(`text.answer_spans`, shared with the span model's `predict_answers` and
the QA SavedModel).

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
import json
import math
import os
from collections import defaultdict
from typing import Sequence

from core.atomic import atomic_open
from data_prep.datasets.squad import SquadExample
from data_prep.datasets.squad_features import InputFeatures
from text.answer_spans import BasicWords, candidate_spans, final_text, pieces_text


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
    words = BasicWords(do_lower_case)
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
        if version_2:
            score = float(result.start_logits[0]) + float(result.end_logits[0])
            if null is None or score < null.score:
                null = _Candidate(score, float(result.start_logits[0]),
                                  float(result.end_logits[0]))
        starts = {position for position, is_max in feature.token_is_max_context.items()
                  if is_max}
        for span in candidate_spans(result.start_logits, result.end_logits, starts,
                                    feature.token_to_orig_map, n_best_size, max_answer_length):
            candidates.append(_Candidate(span.score, span.start_logit, span.end_logit, feature,
                                         span.start, span.end))
    if null is not None:
        candidates.append(null)  # after the spans: a tie in score keeps spans first
    candidates.sort(key=lambda c: c.score, reverse=True)
    return candidates, null


def _span_texts(example: SquadExample, candidate: _Candidate) -> tuple[str, str]:
    """(the span's WordPiece text with "##" joins undone, the original words it covers)."""
    feature = candidate.feature
    first = feature.token_to_orig_map[candidate.start]
    last = feature.token_to_orig_map[candidate.end]
    return (pieces_text(feature.tokens[candidate.start:candidate.end + 1]),
            " ".join(example.doc_tokens[first:last + 1]))


def _nbest(example: SquadExample, candidates: list[_Candidate], null: _Candidate | None,
           n_best_size: int, words: BasicWords) -> list[dict]:
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
            text = final_text(tokenized, original, words.get(original))
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
