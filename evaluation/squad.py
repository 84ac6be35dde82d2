"""The official SQuAD v1.1 and v2.0 metrics, and their command line.

An answer is compared after normalization: lowercase, punctuation
(`string.punctuation`) removed, the articles a/an/the removed, whitespace
collapsed. Exact match is equality of normalized texts; F1 is over the
bags of normalized words. Each question takes its best score over its gold
answers, and the dataset score is the mean, in percent.

v2.0 differs in three ways that change numbers, all kept here: gold answers
that normalize to nothing are dropped and a question with none left has the
single gold answer "" (so predicting "" is exactly right on unanswerable
questions); F1 between two empty texts is 1 (v1.1 gives 0); and a question
whose no-answer probability exceeds `na_prob_thresh` counts as answered "".
Given no-answer probabilities (for BERT, the null odds), it also reports
the best exact match and F1 over all thresholds, and the thresholds.

A question with no prediction scores 0 in both versions and is reported
once as a count (the official v2.0 script stopped with a KeyError).

    python -m evaluation.squad DATA.json PREDICTIONS.json [--na_prob_file F]
        [--na_prob_thresh T] [--version 1.1|2.0]

The official script's spellings `--na-prob-file` and `--na-prob-thresh`
are accepted too.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import string
from typing import Any, Iterator

from absl import flags

from core import program
from core.arguments import FieldError
from text.text_files import read_utf8_lines

_log = logging.getLogger(__name__)
_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, then articles, then collapse whitespace."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction: str, ground_truth: str, empty_matches_empty: bool = True) -> float:
    """Word-bag F1 of the normalized texts.

    With `empty_matches_empty` (v2.0), an empty text scores 1 against an
    empty text and 0 against anything else; v1.1 scores every empty case 0.
    """
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(ground_truth).split()
    if empty_matches_empty and (not predicted or not gold):
        return float(predicted == gold)
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset_json: Any) -> Iterator[tuple[str, list[str]]]:
    """(id, gold answer texts) of every question, with errors saying where the JSON is wrong."""
    where = "the top level"
    try:
        for a, article in enumerate(dataset_json["data"]):
            where = f"data[{a}]"
            for p, paragraph in enumerate(article["paragraphs"]):
                where = f"data[{a}].paragraphs[{p}]"
                for q, qa in enumerate(paragraph["qas"]):
                    where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                    yield str(qa["id"]), [answer["text"] for answer in qa["answers"]]
    except (KeyError, TypeError) as error:
        raise ValueError(f"dataset is not in the SQuAD layout near {where}: "
                         f"{type(error).__name__} {error}") from None


def _warn_missing(missing: list[str]) -> None:
    if missing:
        _log.warning("%d questions have no prediction and score 0, e.g. %s",
                     len(missing), ", ".join(missing[:5]))


def evaluate_v1(dataset_json: Any, predictions: dict[str, str]) -> dict[str, float]:
    """SQuAD v1.1: {"exact_match", "f1"} in percent over all questions."""
    exact = f1 = total = 0.0
    missing = []
    for qid, golds in _questions(dataset_json):
        total += 1
        if not golds:
            raise ValueError(f"question {qid} has no gold answer; a SQuAD 2.0 file needs "
                             "version 2.0")
        if qid not in predictions:
            missing.append(qid)
            continue
        exact += max(exact_match_score(predictions[qid], gold) for gold in golds)
        f1 += max(f1_score(predictions[qid], gold, empty_matches_empty=False) for gold in golds)
    if not total:
        raise ValueError("the dataset holds no questions")
    _warn_missing(missing)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def evaluate_v2(dataset_json: Any, predictions: dict[str, str],
                na_probs: dict[str, float] | None = None,
                na_prob_thresh: float = 1.0) -> collections.OrderedDict:
    """SQuAD v2.0: exact, f1, total, the HasAns_/NoAns_ breakdown, and best_* given na_probs."""
    has_answer: dict[str, bool] = {}
    raw_exact: dict[str, float] = {}
    raw_f1: dict[str, float] = {}
    for qid, golds in _questions(dataset_json):
        has_answer[qid] = bool(golds)
        if qid in predictions:
            golds = [gold for gold in golds if normalize_answer(gold)] or [""]
            raw_exact[qid] = max(exact_match_score(predictions[qid], gold) for gold in golds)
            raw_f1[qid] = max(f1_score(predictions[qid], gold) for gold in golds)
    if not has_answer:
        raise ValueError("the dataset holds no questions")
    _warn_missing([qid for qid in has_answer if qid not in predictions])
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    lacking = [qid for qid in raw_exact if qid not in probs]
    if lacking:
        raise ValueError(f"{len(lacking)} predicted questions have no no-answer probability, "
                         f"e.g. {lacking[0]}")

    def thresholded(raw: dict[str, float]) -> dict[str, float]:
        return {qid: float(not has_answer[qid]) if probs[qid] > na_prob_thresh else score
                for qid, score in raw.items()}

    exact, f1 = thresholded(raw_exact), thresholded(raw_f1)
    result = collections.OrderedDict()
    groups = {"": list(has_answer), "HasAns_": [q for q, has in has_answer.items() if has],
              "NoAns_": [q for q, has in has_answer.items() if not has]}
    for prefix, qids in groups.items():
        if qids:
            result[prefix + "exact"] = 100.0 * sum(exact.get(q, 0.0) for q in qids) / len(qids)
            result[prefix + "f1"] = 100.0 * sum(f1.get(q, 0.0) for q in qids) / len(qids)
            result[prefix + "total"] = len(qids)
    if na_probs is not None:
        for name, raw in (("exact", raw_exact), ("f1", raw_f1)):
            best, thresh = _best_threshold(predictions, raw, probs, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, thresh
    return result


def _best_threshold(predictions: dict[str, str], raw: dict[str, float],
                    na_probs: dict[str, float], has_answer: dict[str, bool]
                    ) -> tuple[float, float]:
    """The best score (percent) over no-answer thresholds, and that threshold.

    Start with every question answered "" (each unanswerable one right),
    then lower the threshold past one question at a time, in increasing
    no-answer probability: each then keeps its prediction, gaining its score
    if it has an answer, losing 1 if it has none but a non-empty prediction.
    Questions without a prediction score 0 throughout.
    """
    score = best = sum(1 for qid, has in has_answer.items() if not has and qid in raw)
    best_thresh = 0.0
    for qid in sorted(na_probs, key=na_probs.__getitem__):
        if qid not in raw:
            continue
        if has_answer[qid]:
            score += raw[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_thresh = score, na_probs[qid]
    return 100.0 * best / len(has_answer), best_thresh


def load_json(path: str, what: str) -> Any:
    """A JSON file's content; ValueError naming the file (and line, column) when bad."""
    try:
        return json.loads("\n".join(read_utf8_lines(path)))
    except json.JSONDecodeError as error:
        raise ValueError(f"{what} {path}: malformed JSON at line {error.lineno}, column "
                         f"{error.colno}: {error.msg}") from None


def _string_map(content: Any, path: str, value_type: type | tuple[type, ...]) -> dict:
    if not isinstance(content, dict) or not all(
            isinstance(v, value_type) and not isinstance(v, bool) for v in content.values()):
        kind = getattr(value_type, "__name__", "number")
        raise ValueError(f"{path}: expected a JSON object of question id -> {kind}")
    return content


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The command's flags, defined only when it runs as a program."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("na_prob_file", None, "v2.0: JSON of question id -> no-answer "
                        "probability.", **into)
    flags.DEFINE_float("na_prob_thresh", 1.0, "v2.0: predict no answer above this "
                       "probability.", **into)
    flags.DEFINE_enum("version", None, ["1.1", "2.0"], "Metric version (default: 2.0 when any "
                      "question has is_impossible).", **into)
    for name in ("na_prob_file", "na_prob_thresh"):  # the official script's spellings
        flags.DEFINE_alias(name.replace("_", "-"), name, flag_values=flag_values)


def main(argv: list[str], values: flags.FlagValues = flags.FLAGS) -> None:
    """Prints the metrics of the predictions in `argv[2]` on the dataset in `argv[1]`, as JSON."""
    if len(argv) != 3:
        raise ValueError("expected two arguments, DATA.json PREDICTIONS.json; got "
                         f"{len(argv) - 1}")
    data_file, pred_file = argv[1:]
    dataset = load_json(data_file, "dataset")
    predictions = _string_map(load_json(pred_file, "predictions"), pred_file, str)
    version = values.version or _detect_version(dataset)
    if version == "1.1":
        if values.na_prob_file:
            raise FieldError("{na_prob_file} applies to SQuAD 2.0 only")
        print(json.dumps(evaluate_v1(dataset, predictions)))
        return
    na_probs = None
    if values.na_prob_file:
        na_probs = _string_map(load_json(values.na_prob_file, "no-answer probabilities"),
                               values.na_prob_file, (int, float))
    print(json.dumps(evaluate_v2(dataset, predictions, na_probs, values.na_prob_thresh),
                     indent=2))


def _detect_version(dataset: Any) -> str:
    """2.0 when any question carries `is_impossible`, else 1.1."""
    try:
        for article in dataset["data"]:
            for paragraph in article["paragraphs"]:
                if any("is_impossible" in qa for qa in paragraph["qas"]):
                    return "2.0"
    except (KeyError, TypeError):
        raise ValueError("dataset is not in the SQuAD layout (data -> paragraphs -> qas)") from None
    return "1.1"


if __name__ == "__main__":
    program.run_command(define_flags, main, __name__)
