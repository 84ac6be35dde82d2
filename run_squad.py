"""Fine-tunes BERT for SQuAD v1.1 / v2.0 question answering; predicts and scores answers.

The paper's method (Section 4.2-4.3): the question and a window of the
context are packed as `[CLS] question [SEP] context [SEP]`; a start vector
S and an end vector E score every token, and the loss is the mean of the
start and end cross-entropies. Contexts longer than a window are read in
windows `--doc_stride` tokens apart. For v2.0 an unanswerable question
targets [CLS], and a question is answered "" when the null score beats the
best span by more than `--null_score_diff_threshold`. `--bilstm_units=N`
puts a randomly initialized BiLSTM between the encoder and the span layer
(Table 5's "+ BiLSTM" row).

Flags keep the original `run_squad.py` names. `--do_train` reads
`--train_file` (questions whose `answer_start` does not match their answer
text are skipped and counted, as the original did) and writes `model.ckpt*`
with `bert_config.json` and `vocab.txt`. `--do_predict` reads
`--predict_file` and writes `predictions.json`, `nbest_predictions.json`
and, for v2.0, `null_odds.json` (null score minus best span score, per
question). `--do_eval` also predicts `--predict_file`, then scores the
predictions with the official metric definitions and writes them to
`eval_results.txt` (`key = value`) and to stdout as JSON: `exact_match`
and `f1` for v1.1; for v2.0 `exact`, `f1`, the `HasAns_*`/`NoAns_*`
breakdown, and `best_exact`/`best_f1` with their thresholds found from the
null odds. `exact` and `f1` score `predictions.json` as written.

Tuning the v2.0 threshold, as the paper did on dev: run once with the
default threshold 0, read `best_f1_thresh` from `eval_results.txt`, and
predict again with `--null_score_diff_threshold=<that value>` (with
`--init_checkpoint=<output_dir>/model.ckpt` and no `--do_train`, the
fine-tuned model is reused as is). The search only sees the answers of the
first run, so its figures hold exactly for thresholds at or below the one
used there (at the default 0: for every negative threshold).

Without `--do_train`, the model is `--init_checkpoint` as loaded: a
previously fine-tuned `model.ckpt`, or a pre-trained encoder with a random
span layer.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from absl import flags, logging

from training import finetuning, runner_flags

if TYPE_CHECKING:
    from data_prep.datasets.squad import SquadExample
    from data_prep.datasets.squad_features import InputFeatures
    from data_prep.text.tokenization import FullTokenizer

FLAGS = flags.FLAGS
finetuning.define_flags(max_seq_length=384, learning_rate=3e-5, num_train_epochs=2.0,
                        train_batch_size=12)
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None,
                    "SQuAD JSON to predict (and score with --do_eval), e.g. dev-v1.1.json.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD 2.0: questions may have no answer (is_impossible).")
flags.DEFINE_integer("doc_stride", 128, "Tokens between the starts of a context's windows.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept; longer ones are cut.")
flags.DEFINE_integer("n_best_size", 20, "Start and end candidates per window; n-best list size.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer in WordPiece tokens.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "SQuAD 2.0: answer \"\" when null score - best span score exceeds this.")
flags.DEFINE_bool("verbose_logging", False,
                  "Log the tokens and targets of the first windows of each file.")
flags.DEFINE_integer("bilstm_units", 0,
                     "Units per direction of a BiLSTM before the span layer (0: none).")

_LOGGED_WINDOWS = 20


def _check_flags() -> None:
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file")
    if (FLAGS.do_predict or FLAGS.do_eval) and not FLAGS.predict_file:
        raise ValueError("--do_predict and --do_eval need --predict_file")
    runner_flags.check_ranges(
        FLAGS, positive=("doc_stride", "max_query_length", "n_best_size", "max_answer_length"),
        non_negative=("bilstm_units",))


def _read(path: str, tokenizer: FullTokenizer, is_training: bool
          ) -> tuple[list[SquadExample], list[InputFeatures]]:
    """(examples, windows) of one SQuAD file."""
    from data_prep.datasets.squad import read_squad_examples
    from data_prep.datasets.squad_features import convert_examples_to_features

    examples, report = read_squad_examples(path, is_training, FLAGS.version_2_with_negative)
    logging.info(report.summary())
    features = convert_examples_to_features(examples, tokenizer, FLAGS.max_seq_length,
                                            FLAGS.doc_stride, FLAGS.max_query_length,
                                            is_training)
    logging.info("%s: %d questions in %d windows of %d tokens", path, len(examples),
                 len(features), FLAGS.max_seq_length)
    if FLAGS.verbose_logging:
        for feature in features[:_LOGGED_WINDOWS]:
            example = examples[feature.example_index]
            target = ("" if feature.start_position is None else
                      f" target {feature.start_position}-{feature.end_position}"
                      f"{' (impossible)' if feature.is_impossible else ''}")
            logging.info("%s window %d (unique_id %d)%s: %s", example.qas_id,
                         feature.doc_span_index, feature.unique_id, target,
                         " ".join(feature.tokens))
    return examples, features


def _predict(model, examples: list[SquadExample], features: list[InputFeatures],
             do_lower_case: bool) -> tuple[dict[str, str], dict[str, float]]:
    """Writes the prediction files; returns (answers, null odds (v2.0)) for scoring."""
    from data_prep.datasets.squad_features import features_to_arrays
    from evaluation.squad_predictions import (RawResult, compute_predictions,
                                              write_prediction_files)

    arrays = features_to_arrays(features)
    outputs = finetuning.predict(model, arrays, FLAGS.predict_batch_size)
    results = [RawResult(int(unique_id), start, end) for unique_id, start, end
               in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
    predictions, nbest, null_odds = compute_predictions(
        examples, features, results, FLAGS.n_best_size, FLAGS.max_answer_length,
        do_lower_case, FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold)
    write_prediction_files(FLAGS.output_dir, predictions, nbest, null_odds)
    empty = sum(1 for text in predictions.values() if not text)
    logging.info("Wrote answers to %d questions (%d of them empty) in %s", len(predictions),
                 empty, FLAGS.output_dir)
    return predictions, null_odds


def _evaluate(predictions: dict[str, str], null_odds: dict[str, float]) -> dict[str, float]:
    from evaluation.squad import evaluate_v1, evaluate_v2, load_json

    dataset = load_json(FLAGS.predict_file, "--predict_file")
    if not FLAGS.version_2_with_negative:
        try:
            return evaluate_v1(dataset, predictions)
        except ValueError as error:  # a v2.0 file: unanswerable questions have no answers
            raise ValueError(f"{FLAGS.predict_file}: {error}; for SQuAD 2.0 pass "
                             "--version_2_with_negative") from None
    # Thresholding at the flag's value leaves predictions.json's answers as they are.
    return dict(evaluate_v2(dataset, predictions, null_odds,
                            na_prob_thresh=FLAGS.null_score_diff_threshold))


def main(argv: list[str]) -> None:
    del argv
    _check_flags()
    setup = finetuning.setup()
    import keras

    from modeling.task_models import BertSpanModel, span_loss
    from training import cli

    from data_prep.datasets.squad_features import features_to_arrays

    if FLAGS.do_train:  # read before the model is built: a bad file fails fast
        train_arrays = features_to_arrays(_read(FLAGS.train_file, setup.tokenizer,
                                                is_training=True)[1])
        del train_arrays["unique_ids"]
    if FLAGS.do_predict or FLAGS.do_eval:
        predict_examples, predict_features = _read(FLAGS.predict_file, setup.tokenizer,
                                                   is_training=False)
    keras.utils.set_random_seed(FLAGS.random_seed)
    model = finetuning.build_model(
        setup.strategy, lambda: BertSpanModel(setup.config, bilstm_units=FLAGS.bilstm_units),
        FLAGS.init_checkpoint)
    if FLAGS.do_train:
        finetuning.train(model, setup.strategy, train_arrays, span_loss, FLAGS.output_dir,
                         seed=FLAGS.random_seed)
        finetuning.save_model_files(model, setup.config, FLAGS.output_dir)
    if not (FLAGS.do_predict or FLAGS.do_eval):
        return
    predictions, null_odds = _predict(model, predict_examples, predict_features,
                                      setup.tokenizer.do_lower_case)
    if FLAGS.do_eval:
        results = _evaluate(predictions, null_odds)
        cli.write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
        for key, value in sorted(results.items()):
            logging.info("  %s = %s", key, value)
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    from training.cli import run

    run(main)
