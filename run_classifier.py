"""Fine-tunes BERT on a GLUE task, SWAG, or your own TSV data; evaluates; writes submissions.

Tasks: cola, sst-2, mrpc, sts-b (regression), qqp, mnli (dev/test matched
and mismatched, plus AX when its file is found), qnli, rte, wnli, ax, swag
(multiple choice), and `tsv` for your own data (`--tsv_text_a_column`,
`--tsv_text_b_column`, `--tsv_label_column`, `--tsv_labels`).
`--multi_label` reads a label set per row from the tsv task's label column
(`sports|politics`, an empty cell for none): the classifier gives each
label a sigmoid, trains with binary cross-entropy, predicts the labels
above `--threshold`, and scores F1 per label and micro/macro (micro chooses
the sweep's best run); the submission lists each row's label set.
`--class_weights` weighs the training loss for imbalanced labels:
`balanced`, or `label:weight` pairs (`training.class_weights`); the output
folder records them, so a rerun with other weights is refused rather than
resumed.

The paper's recipe (Section 4.1, see `tasks/driver.py`): for each
learning rate in `--learning_rates` and each of `--num_restarts` restarts,
fine-tune and score on dev; keep the best. Every run is listed in
`sweep_results.tsv`; the best run's model is the one evaluated, used for
test predictions, saved and exported.

`--causal` fine-tunes the left-to-right (GPT-style) model: causal attention
and the classifier on the last token (SWAG: each choice scored from its
last token); `--lm_aux_weight` adds GPT's auxiliary language-model loss, and
`--both_orders` GPT's input for similarity tasks (MRPC, QQP, STS-B): each
pair encoded as (a, b) and (b, a), the two last-token vectors added.
`--bilstm_units` classifies from a randomly initialized BiLSTM's final
states instead (Table 5's "+ BiLSTM": a right-to-left reading on top of the
left-to-right model). `--wnli_majority_class` writes WNLI's test submission
as the majority class, as the paper did.

Outputs in `--output_dir`: `eval_results.txt`, `sweep_results.tsv`,
`submission/<TASK>.tsv` (GLUE server layout), `model.ckpt*` with
`bert_config.json` and `vocab.txt`, and `saved_model/` whose signature takes
raw strings.
"""

from __future__ import annotations

from absl import flags

from cli import runner_flags
from core import program
from tasks import classification

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """The shared fine-tuning flags at the original classifier's defaults, then the task's own."""
    into = {"flag_values": flag_values}
    runner_flags.define_finetuning_flags(flag_values, max_seq_length=128, learning_rate=5e-5,
                                         num_train_epochs=3.0)
    flags.DEFINE_string("task_name", None, "GLUE task, swag, or tsv.", **into)
    flags.DEFINE_string("data_dir", None,
                        "Folder with the task's files in their distributed layout.", **into)
    runner_flags.define_variant_flags(
        flag_values, causal="Left-to-right model (causal attention, last-token classifier).",
        bilstm_units="Units per direction of a randomly initialized BiLSTM whose final states "
                     "classify (0: none; Table 5's + BiLSTM).",
        export_saved_model="Export a SavedModel taking raw strings.")
    flags.DEFINE_float("lm_aux_weight", 0.0, "GPT's auxiliary LM loss weight (with --causal).",
                       **into)
    flags.DEFINE_bool("both_orders", False,
                      "With --causal: encode each pair in both orders and add them (GPT's "
                      "similarity input).", **into)
    flags.DEFINE_bool("wnli_majority_class", False, "Submit WNLI's majority class, as the paper.",
                      **into)
    flags.DEFINE_string("tsv_text_a_column", None, "tsv task: first text column (name or index).",
                        **into)
    flags.DEFINE_string("tsv_text_b_column", None, "tsv task: second text column, for pairs.",
                        **into)
    flags.DEFINE_string("tsv_label_column", None, "tsv task: label column.", **into)
    flags.DEFINE_list("tsv_labels", None, "tsv task: label list (default: from train.tsv).", **into)
    flags.DEFINE_bool("tsv_has_header", True, "tsv task: the files start with a header row.",
                      **into)
    flags.DEFINE_string("class_weights", None,
                        "Weigh each training example's loss by its label's weight: `balanced` "
                        "(N / (labels x count of the label), from the training set) or "
                        "label:weight pairs separated by commas (e.g. neg:1,pos:4; unlisted "
                        "labels weigh 1). Default: unweighted.", **into)
    flags.DEFINE_bool("multi_label", False,
                      "tsv task: the label column holds a label set per row (labels separated "
                      "by --tsv_label_delimiter, an empty cell for none); a sigmoid per label, "
                      "binary cross-entropy, F1 per label and micro/macro.", **into)
    flags.DEFINE_float("threshold", 0.5, "With --multi_label: a label is predicted when its "
                       "probability exceeds this, in (0, 1).", **into)
    flags.DEFINE_string("tsv_label_delimiter", None, "With --multi_label: what separates a "
                        "label set's labels (default |).", **into)
    flags.adopt_module_key_flags(runner_flags, flag_values)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    runner_flags.run_task(values, classification.TASK, classification.ClassificationTask,
                          lambda task: f"classification:{task.task_name.lower()}",
                          stamp=classification.ClassificationTask.stamp)


def console_main() -> None:
    """The installed `bert-run-classifier` command: the same as running this file."""
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
