"""Fine-tunes BERT for SQuAD v1.1 / v2.0 question answering; predicts and scores answers.

The paper's method (Section 4.2-4.3): the question and a window of the
context are packed as `[CLS] question [SEP] context [SEP]`; a start vector
S and an end vector E score every token, and the loss is the mean of the
start and end cross-entropies. Contexts longer than a window are read in
windows `--doc_stride` tokens apart. For v2.0 an unanswerable question
targets [CLS], and a question is answered "" when the null score beats the
best span by more than `--null_score_diff_threshold`. `--causal` fine-tunes
the left-to-right model, whose start and end scores see only the tokens up
to each position (Table 5's "LTR & No NSP" row); `--bilstm_units=N` puts a
randomly initialized BiLSTM between the encoder and the span layer (with
`--causal`, Table 5's "+ BiLSTM" row).

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

`--learning_rates` and `--num_restarts` run the paper's sweep
(`tasks/driver.py`): each (rate, restart) is fine-tuned and scored on
`--predict_file` (with `--do_eval`), the run with the best F1 is saved,
exported and writes the prediction files, and every run is a row of
`sweep_results.tsv` (a run whose loss stops being finite is a row
`diverged at step N`, never chosen).

Without `--do_train`, the model is `--init_checkpoint` as loaded: a
previously fine-tuned `model.ckpt`, or a pre-trained encoder with a random
span layer.
"""

from __future__ import annotations

import json

from absl import flags

from cli import runner_flags
from core import program
from tasks import squad

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """The shared fine-tuning flags at the original `run_squad.py`'s defaults, then SQuAD's own."""
    into = {"flag_values": flag_values}
    runner_flags.define_finetuning_flags(flag_values, max_seq_length=384, learning_rate=3e-5,
                                         num_train_epochs=2.0, train_batch_size=12)
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.",
                        **into)
    flags.DEFINE_string("predict_file", None,
                        "SQuAD JSON to predict (and score with --do_eval), e.g. dev-v1.1.json.",
                        **into)
    flags.DEFINE_bool("version_2_with_negative", False,
                      "SQuAD 2.0: questions may have no answer (is_impossible).", **into)
    flags.DEFINE_integer("doc_stride", 128, "Tokens between the starts of a context's windows.",
                         **into)
    flags.DEFINE_integer("max_query_length", 64, "Question tokens kept; longer ones are cut.",
                         **into)
    flags.DEFINE_integer("n_best_size", 20,
                         "Start and end candidates per window; n-best list size.", **into)
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer in WordPiece tokens.", **into)
    flags.DEFINE_float("null_score_diff_threshold", 0.0,
                       "SQuAD 2.0: answer \"\" when null score - best span score exceeds this.",
                       **into)
    flags.DEFINE_bool("verbose_logging", False,
                      "Log the tokens and targets of the first windows of each file.", **into)
    runner_flags.define_variant_flags(
        flag_values, causal="Fine-tune the left-to-right (GPT-style) model: causal attention, "
                            "so each position is scored from the tokens up to it.",
        bilstm_units="Units per direction of a BiLSTM before the span layer (0: none).",
        export_saved_model="After training, export a SavedModel taking question and context "
                           "strings.")
    flags.adopt_module_key_flags(runner_flags, flag_values)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    result = runner_flags.run_task(values, squad.TASK, squad.SquadTask, lambda task: "squad")
    if result.scores:
        print(json.dumps(result.scores, indent=2))


def console_main() -> None:
    """The installed `bert-run-squad` command: the same as running this file."""
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
