"""GLUE and SWAG metrics, and the single figures the GLUE leaderboard ranks by.

The definitions are those of the GLUE benchmark, computed by the libraries
everyone else uses, so our numbers compare with published ones: accuracy
for every classification task; F1 of the positive class ("1", a paraphrase
or duplicate) for MRPC and QQP, whose classes are unbalanced; Matthews
correlation for CoLA (scikit-learn's, which for more than two classes is
Gorodkin's R_K, the R3 GLUE reports for the diagnostic set AX); Pearson and
Spearman correlation for STS-B (scipy), a regression task.

The names are the ones users already read: the original `run_classifier.py`'s
`eval_accuracy` and `eval_loss`, and Hugging Face's `run_glue.py` names for
the rest (`f1`, `matthews_correlation`, `pearson`, `spearmanr`), so a
script written for either reads our `eval_results.txt` unchanged.

`glue_score` reduces a task's metrics to the leaderboard's one number (the
mean where a task has two), and `glue_average` averages tasks as the
leaderboard does: MNLI matched and mismatched first averaged into one MNLI
score, WNLI included, AX left out. (The BERT paper's Table 1 "Average"
differs: it counts MNLI-m and MNLI-mm as two figures, leaves WNLI out, and
uses F1 alone for MRPC/QQP and Spearman alone for STS-B.) Metrics are
fractions in [0, 1] (correlations in [-1, 1]); the averages keep the scale
they are given.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from core.task_names import canonical_key

CLASSIFICATION_TASKS = ("cola", "sst-2", "mrpc", "qqp", "mnli", "qnli", "rte", "wnli", "ax", "tsv")
MNLI_STEMS = ("mnli-m", "mnli-mm")
POSITIVE_CLASS = 1  # label "1" (paraphrase, duplicate) in MRPC's and QQP's label lists


def _task_key(task_name: str) -> str:
    key = canonical_key(task_name)
    if key in MNLI_STEMS:
        return "mnli"
    if key not in CLASSIFICATION_TASKS and key not in ("sts-b", "swag"):
        raise ValueError(f"unknown task {task_name!r} for GLUE metrics")
    return key


def _checked(predictions: Sequence, labels: Sequence, what: str) -> tuple[np.ndarray, np.ndarray]:
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if len(labels) == 0 or len(predictions) == 0:
        raise ValueError(f"{what}: no predictions or labels to score")
    if len(predictions) != len(labels):
        raise ValueError(f"{what}: {len(predictions)} predictions for {len(labels)} labels")
    if labels.ndim != 1:
        raise ValueError(f"{what}: labels must be one-dimensional, got shape {labels.shape}")
    return predictions, labels


def _class_ids(predictions: np.ndarray) -> np.ndarray:
    """Label ids from ids [N] or scores [N, K]."""
    return predictions.argmax(-1) if predictions.ndim == 2 else predictions


def compute_metrics(task_name: str, predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """The task's metrics from predicted label ids [N] (or scores [N, K]) and gold ids [N].

    STS-B takes predicted and gold scores (floats, [N] or [N, 1]) and gives
    "pearson" and "spearmanr". Classification tasks give "accuracy", plus
    "f1" (MRPC, QQP) or "matthews_correlation" (CoLA, AX). SWAG gives
    "accuracy" over choices.
    """
    key = _task_key(task_name)
    # Imported here: a runner that never scores a dev set is spared their start-up.
    from scipy import stats
    from sklearn import metrics as sk_metrics

    predictions, labels = _checked(predictions, labels, task_name)
    if key == "swag":
        return {"accuracy": multiple_choice_accuracy(predictions, labels)}
    if key == "sts-b":
        scores = predictions.reshape(len(predictions), -1)
        if scores.shape[1] != 1:
            raise ValueError(f"{task_name}: expected one score per example, got shape "
                             f"{predictions.shape}")
        scores, gold = scores[:, 0].astype(np.float64), labels.astype(np.float64)
        pearson = float(stats.pearsonr(scores, gold).statistic)
        spearman = float(stats.spearmanr(scores, gold).statistic)
        return {"pearson": pearson, "spearmanr": spearman}
    predicted = _class_ids(predictions)
    result = {"accuracy": float(sk_metrics.accuracy_score(labels, predicted))}
    if key in ("mrpc", "qqp"):
        result["f1"] = float(sk_metrics.f1_score(labels, predicted, pos_label=POSITIVE_CLASS,
                                                 average="binary", zero_division=0.0))
    if key in ("cola", "ax"):
        result["matthews_correlation"] = float(sk_metrics.matthews_corrcoef(labels, predicted))
    return result


def evaluation_results(task_name: str, outputs: Sequence, labels: Sequence,
                       prefix: str = "eval") -> dict[str, float]:
    """One dev set's entries of eval_results.txt, each name starting `<prefix>_`.

    `outputs` are the model's logits [N, K] (STS-B: scores [N] or [N, 1]).
    The entries are `compute_metrics`' metrics; `loss`, the training loss on
    these examples (mean cross-entropy of the logits, mean squared error for
    STS-B), as the original's `eval_loss`; and `score`, the figure a sweep
    compares (`glue_score`; SWAG: accuracy).

    Examples:
      >>> evaluation_results("rte", [[2.0, 0.0], [0.0, 1.0]], [0, 0])["eval_accuracy"]
      0.5
    """
    metrics = compute_metrics(task_name, outputs, labels)
    values = np.asarray(outputs, np.float64)
    gold = np.asarray(labels)
    if _task_key(task_name) == "sts-b":
        loss = np.mean((values.reshape(-1) - gold.astype(np.float64)) ** 2)
    else:
        if values.ndim != 2:
            raise ValueError(f"{task_name}: the loss needs logits [N, K], got shape "
                             f"{values.shape}")
        from scipy import special  # imported here, as in `compute_metrics`

        log_probabilities = special.log_softmax(values, axis=1)
        loss = -np.mean(log_probabilities[np.arange(len(gold)), gold.astype(np.int64)])
    metrics["loss"] = float(loss)
    metrics["score"] = (metrics["accuracy"] if _task_key(task_name) == "swag"
                        else glue_score(task_name, metrics))
    return {f"{prefix}_{name}": value for name, value in metrics.items()}


def glue_score(task_name: str, metrics: Mapping[str, float]) -> float:
    """The leaderboard's figure for one task from `compute_metrics`' result.

    CoLA and AX: Matthews correlation; MRPC and QQP: mean of F1 and
    accuracy; STS-B: mean of Pearson and Spearman; the others: accuracy.
    """
    key = _task_key(task_name)
    needed = {"cola": ("matthews_correlation",), "ax": ("matthews_correlation",),
              "mrpc": ("f1", "accuracy"), "qqp": ("f1", "accuracy"),
              "sts-b": ("pearson", "spearmanr")}.get(key, ("accuracy",))
    missing = [name for name in needed if name not in metrics]
    if missing:
        raise ValueError(f"{task_name}: metrics lack {', '.join(missing)} (got {sorted(metrics)})")
    return float(np.mean([metrics[name] for name in needed]))


def glue_average(scores: Mapping[str, float]) -> float:
    """The GLUE score: the mean of per-task `glue_score`s, keyed by task name or file stem.

    "MNLI-m" and "MNLI-mm" (or "MNLI") are first averaged into one MNLI
    figure; "AX" is ignored, as on the leaderboard. Tasks not given are not
    counted, so a partial set gives the average of what was run.
    """
    by_task: dict[str, list[float]] = {}
    for name, score in scores.items():
        key = _task_key(name)
        if key in ("swag", "tsv"):
            raise ValueError(f"{name!r} is not a GLUE task")
        if key != "ax":
            by_task.setdefault(key, []).append(float(score))
    if not by_task:
        raise ValueError(f"no GLUE task scores to average (got {sorted(scores)})")
    return float(np.mean([np.mean(task_scores) for task_scores in by_task.values()]))


def multiple_choice_accuracy(predictions: Sequence, labels: Sequence) -> float:
    """Share of examples whose chosen option (ids [N], or scores [N, choices]) is the gold one."""
    predictions, labels = _checked(predictions, labels, "multiple choice")
    return float(np.mean(_class_ids(predictions) == labels))
