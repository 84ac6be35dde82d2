"""GLUE metrics against figures computed by hand, and the leaderboard's averaging."""

import math

import numpy as np
import pytest

from evaluation.glue import compute_metrics, glue_average, glue_score, multiple_choice_accuracy

# A 2x2 table: TP = 3, FN = 2, FP = 1, TN = 2.
GOLD = [1, 1, 1, 1, 1, 0, 0, 0]
PREDICTED = [1, 1, 1, 0, 0, 1, 0, 0]


def test_cola_matthews_correlation_by_hand():
    metrics = compute_metrics("CoLA", PREDICTED, GOLD)
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (6 - 2) / sqrt(4*5*3*4)
    assert metrics["mcc"] == pytest.approx(4 / math.sqrt(240))
    assert metrics["accuracy"] == pytest.approx(5 / 8)
    assert glue_score("cola", metrics) == pytest.approx(4 / math.sqrt(240))


@pytest.mark.parametrize("task", ["MRPC", "qqp"])
def test_f1_of_the_positive_class(task):
    metrics = compute_metrics(task, PREDICTED, GOLD)
    precision, recall = 3 / 4, 3 / 5
    assert metrics == pytest.approx({"accuracy": 5 / 8,
                                     "f1": 2 * precision * recall / (precision + recall)})
    assert glue_score(task, metrics) == pytest.approx((5 / 8 + 2 / 3) / 2)


def test_f1_without_positive_predictions_is_zero():
    assert compute_metrics("mrpc", [0, 0], [1, 0])["f1"] == 0.0


def test_stsb_pearson_spearman_and_their_mean():
    predicted, gold = [1.0, 2.0, 3.0, 10.0], [1.0, 3.0, 2.0, 4.0]
    metrics = compute_metrics("STS-B", np.array(predicted)[:, None], gold)
    # Deviations from the means (4 and 2.5): x = -3 -2 -1 6, y = -1.5 .5 -.5 1.5.
    pearson = 13 / math.sqrt(50 * 5)
    # Ranks equal the gold values and 1 2 3 4: deviations -1.5 -.5 .5 1.5 against y.
    spearman = 4 / 5
    assert metrics == pytest.approx({"pearson": pearson, "spearman": spearman,
                                     "corr": (pearson + spearman) / 2})
    assert glue_score("stsb", metrics) == pytest.approx((pearson + spearman) / 2)


def test_accuracy_tasks_take_ids_or_scores():
    scores = [[0.2, 0.5, 0.3], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]
    assert compute_metrics("mnli", scores, [1, 0, 0]) == pytest.approx({"accuracy": 2 / 3})
    assert compute_metrics("MNLI-mm", [1, 0, 2], [1, 0, 0])["accuracy"] == pytest.approx(2 / 3)
    for task in ("sst-2", "QNLI", "rte", "wnli", "tsv"):
        assert glue_score(task, compute_metrics(task, [0, 1, 1, 1], [0, 1, 0, 1])) == 0.75


def test_diagnostic_uses_multiclass_matthews_correlation():
    gold = np.array([0, 0, 1, 1, 2, 2])
    predicted = np.array([0, 1, 1, 1, 2, 0])
    # R_K: covariance of the one-hot codings over the square root of their variances.
    x, y = np.eye(3)[predicted], np.eye(3)[gold]
    x, y = x - x.mean(0), y - y.mean(0)
    expected = (x * y).sum() / math.sqrt((x * x).sum() * (y * y).sum())
    metrics = compute_metrics("AX", predicted, gold)
    assert metrics["mcc"] == pytest.approx(expected)
    assert glue_score("ax", metrics) == pytest.approx(expected)


def test_glue_average_reproduces_the_leaderboard_bert_large_score():
    # BERT-Large on the GLUE leaderboard (test, percent): overall score 80.5.
    metrics = {"CoLA": {"mcc": 60.5}, "SST-2": {"accuracy": 94.9},
               "MRPC": {"f1": 89.3, "accuracy": 85.4}, "STS-B": {"pearson": 87.6,
                                                                 "spearman": 86.5},
               "QQP": {"f1": 72.1, "accuracy": 89.3}, "MNLI-m": {"accuracy": 86.7},
               "MNLI-mm": {"accuracy": 85.9}, "QNLI": {"accuracy": 92.7},
               "RTE": {"accuracy": 70.1}, "WNLI": {"accuracy": 65.1}, "AX": {"mcc": 39.6}}
    scores = {task: glue_score(task, values) for task, values in metrics.items()}
    assert round(glue_average(scores), 1) == 80.5
    assert glue_average({"rte": 0.5, "MNLI-m": 0.8, "MNLI-mm": 0.6}) == pytest.approx(0.6)


def test_multiple_choice_accuracy_from_scores_or_choices():
    scores = [[0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.1, 0.9]]
    assert multiple_choice_accuracy(scores, [2, 1, 3]) == pytest.approx(2 / 3)
    assert multiple_choice_accuracy([2, 0, 3], [2, 1, 3]) == pytest.approx(2 / 3)
    assert compute_metrics("swag", scores, [2, 0, 3]) == {"accuracy": 1.0}


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        compute_metrics("cola", [0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="no predictions or labels"):
        compute_metrics("rte", [], [])
    with pytest.raises(ValueError, match="no predictions or labels"):
        multiple_choice_accuracy([], [])
    with pytest.raises(ValueError, match="unknown task 'xnli'"):
        compute_metrics("xnli", [0], [0])
    with pytest.raises(ValueError, match="one score per example"):
        compute_metrics("sts-b", [[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0])
    with pytest.raises(ValueError, match="metrics lack f1"):
        glue_score("mrpc", {"accuracy": 0.8})
    with pytest.raises(ValueError, match="'swag' is not a GLUE task"):
        glue_average({"swag": 0.8})
    with pytest.raises(ValueError, match="no GLUE task scores"):
        glue_average({"AX": 0.3})
