"""Named-entity recognition on CoNLL-2003 files: fine-tuning, or the feature-based approach.

`--mode=fine_tune` (Section 5.3): a linear tagger on every position of the
encoder's last layer, all weights trained, each word predicted at its first
WordPiece and no CRF, as the paper. `--document_context` fills each window
with the neighbouring sentences of the same document, the "maximal document
context" the paper used; only the target sentence is scored. `--causal`
fine-tunes the left-to-right model, and `--bilstm_units` puts a randomly
initialized BiLSTM under the tagger (Table 5's "+ BiLSTM").

`--mode=feature_based` (Section 5.4, Table 7): the pre-trained encoder stays
frozen. Its activations (`--feature_layers`, one flag value per Table 7 row)
are computed once per split and cached as .npy files in
`--feature_cache_dir`; a two-layer BiLSTM (`--lstm_units`) with a linear
classifier is trained on them with Adam (see `tasks/tagging.py`). Later runs
that change only the classifier (learning rate, units, epochs) reuse the
cache; with `--cache_all_feature_layers` the one encoder pass also caches
the other rows' features, so a Table 7 sweep runs the encoder once. The
BiLSTM trains from scratch: unless `--learning_rate` or `--learning_rates`
is given, it uses 1e-3 rather than the fine-tuning default.

Either mode takes the paper's sweep (`tasks/driver.py`): each rate of
`--learning_rates` times `--num_restarts` is a run, scored on valid.txt
(with `--do_eval`); the best run is saved and predicts, and every run is a
row of `sweep_results.tsv` (a run whose loss stops being finite is a row
`diverged at step N`, never chosen).

Inputs: `--data_dir` with `train.txt`, `valid.txt` (or `dev.txt`) and
`test.txt`, or the shared task's `eng.train`, `eng.testa` and `eng.testb`,
in CoNLL-2003 layout (`TOKEN POS CHUNK TAG`, or `TOKEN TAG`), IOB1 or IOB2
tags. Outputs in `--output_dir`: `eval_results.txt` with
conlleval's entity-level precision/recall/F1 (`eval_*` for valid with
--do_eval, `test_*` for test with --do_predict, and F1 per entity type),
`valid_predictions.txt` / `test_predictions.txt` as `TOKEN GOLD PRED`
lines, `sweep_results.tsv`, and the trained model (`model.ckpt*` with its config and vocabulary,
or `feature_tagger.weights.h5`). The paper used a cased model for NER:
pass `--do_lower_case=false` with a cased vocabulary.
"""

from __future__ import annotations

from absl import flags

from cli import runner_flags
from core import program
from modeling.feature_tagger import FEATURE_LAYERS
from tasks import tagging

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """The shared fine-tuning flags, then the tagger's own for both modes (help names the mode)."""
    into = {"flag_values": flag_values}
    runner_flags.define_finetuning_flags(flag_values, max_seq_length=128, learning_rate=5e-5,
                                         num_train_epochs=3.0, train_batch_size=32)
    flags.DEFINE_string("data_dir", None,
                        "Folder with train.txt, valid.txt (or dev.txt), test.txt; or eng.train, "
                        "eng.testa, eng.testb.", **into)
    flags.DEFINE_list("labels", None, "Tag set, comma-separated (default: the training file's).",
                      **into)
    flags.DEFINE_enum("tag_scheme", "auto", ["auto", "IOB1", "IOB2"],
                      "Tagging scheme of the files (auto: detected from the training data).",
                      **into)
    flags.DEFINE_bool("document_context", False,
                      "Fill windows with neighbouring sentences of the same document "
                      "(Section 5.3).", **into)
    flags.DEFINE_integer("window_stride", None, "Sub-tokens between the windows of a sentence "
                         "longer than one window (default: half a window).", **into)
    flags.DEFINE_enum("mode", "fine_tune", ["fine_tune", "feature_based"],
                      "Fine-tune BERT, or train a BiLSTM on frozen BERT features (Table 7).",
                      **into)
    runner_flags.define_variant_flags(
        flag_values, causal="fine_tune the left-to-right (GPT-style) model: causal attention, "
                            "so each token's tag sees only the tokens up to it.",
        bilstm_units="fine_tune: units per direction of a randomly initialized BiLSTM between "
                     "the encoder and the tags (0: none).",
        export_saved_model="fine_tune: after training, export a SavedModel tagging raw "
                           "sentences.")
    flags.DEFINE_enum("feature_layers", "concat_last_four", list(FEATURE_LAYERS),
                      "feature_based: which encoder layers make the features (Table 7's rows).",
                      **into)
    flags.DEFINE_integer("lstm_units", 768, "feature_based: units of each BiLSTM direction.",
                         **into)
    flags.DEFINE_float("lstm_dropout", 0.1, "feature_based: dropout on features and LSTM outputs.",
                       **into)
    flags.DEFINE_string("feature_cache_dir", None,
                        "feature_based: cached features (default: <output_dir>/features).", **into)
    flags.DEFINE_bool("cache_all_feature_layers", False,
                      "feature_based: where the features are computed, cache every other "
                      "--feature_layers choice too, from the same encoder pass (Table 7's rows "
                      "then share one pass; several times the disk).", **into)
    flags.adopt_module_key_flags(runner_flags, flag_values)


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    program.check_no_arguments(argv)
    # The BiLSTM trains from scratch at its own default rate, unless --learning_rate is given.
    rate = {"feature_learning_rate": values.learning_rate} if values["learning_rate"].present \
        else {}
    runner_flags.run_task(values, tagging.TASK, tagging.TaggingTask,
                          lambda task: f"ner:{task.mode}", **rate)


def console_main() -> None:
    """The installed `bert-run-ner` command: the same as running this file."""
    program.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    console_main()
