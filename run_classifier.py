"""Fine-tunes BERT on a GLUE task, SWAG, or your own TSV data; evaluates; writes submissions.

Tasks: cola, sst-2, mrpc, sts-b (regression), qqp, mnli (dev/test matched
and mismatched, plus AX when its file is found), qnli, rte, wnli, ax, swag
(multiple choice), and `tsv` for your own data (`--tsv_text_a_column`,
`--tsv_text_b_column`, `--tsv_label_column`, `--tsv_labels`).

The paper's recipe (Section 4.1): for each learning rate in
`--learning_rates` and each of `--num_restarts` restarts (different data
order and classifier initialization), fine-tune and score on dev; keep the
best. Every run is listed in `sweep_results.tsv`; the best run's model is
the one evaluated, used for test predictions, saved and exported. A run
whose loss stops being finite is listed as `diverged at step N` and never
chosen; if every run diverges, nothing is saved and the runner fails.

`--causal` fine-tunes the left-to-right (GPT-style) model: causal attention
and the classifier on the last token; `--lm_aux_weight` adds GPT's
auxiliary language-model loss. `--wnli_majority_class` writes WNLI's test
submission as the majority class, as the paper did.

Outputs in `--output_dir`: `eval_results.txt`, `sweep_results.tsv`,
`submission/<TASK>.tsv` (GLUE server layout), `model.ckpt*` with
`bert_config.json` and `vocab.txt`, and `saved_model/` whose signature takes
raw strings.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
from absl import flags, logging

from training import finetuning, runner_flags

FLAGS = flags.FLAGS
finetuning.define_flags(max_seq_length=128, learning_rate=5e-5, num_train_epochs=3.0)
flags.DEFINE_string("task_name", None, "GLUE task, swag, or tsv.")
flags.DEFINE_string("data_dir", None, "Folder with the task's files in their distributed layout.")
flags.DEFINE_list("learning_rates", [], "Sweep these learning rates (default: --learning_rate).")
flags.DEFINE_integer("num_restarts", 1, "Runs per learning rate, with different seeds.")
flags.DEFINE_bool("causal", False, "Left-to-right model (causal attention, last-token classifier).")
flags.DEFINE_float("lm_aux_weight", 0.0, "GPT's auxiliary LM loss weight (with --causal).")
flags.DEFINE_bool("wnli_majority_class", False, "Submit WNLI's majority class, as the paper.")
flags.DEFINE_bool("export_saved_model", True, "Export a SavedModel taking raw strings.")
flags.DEFINE_string("tsv_text_a_column", None, "tsv task: first text column (name or index).")
flags.DEFINE_string("tsv_text_b_column", None, "tsv task: second text column, for pairs.")
flags.DEFINE_string("tsv_label_column", None, "tsv task: label column.")
flags.DEFINE_list("tsv_labels", None, "tsv task: label list (default: from train.tsv).")
flags.DEFINE_bool("tsv_has_header", True, "tsv task: the files start with a header row.")


@dataclasses.dataclass
class TaskData:
    """A task's arrays and how to score them."""

    name: str
    labels: list[str] | None
    multiple_choice: bool
    pair: bool
    train: dict | None
    dev: dict[str, tuple[dict, list]]
    test: dict[str, tuple[dict, list]]
    train_examples: list


def _load_task(tokenizer) -> TaskData:
    from data_prep.datasets import glue
    from data_prep.datasets import swag

    task = FLAGS.task_name.lower()
    length = FLAGS.max_seq_length
    if task == "swag":
        def read(name, has_label):
            return swag.read_swag(os.path.join(FLAGS.data_dir, name), has_label)

        def arrays(examples):
            return swag.convert_multiple_choice(examples, tokenizer, length)

        train = read("train.csv", True) if FLAGS.do_train else []
        dev = {"dev": read("val.csv", True)} if FLAGS.do_eval else {}
        test = {"SWAG": read("test.csv", False)} if FLAGS.do_predict else {}
        return TaskData("SWAG", None, True, True, arrays(train) if train else None,
                        {k: (arrays(v), v) for k, v in dev.items()},
                        {k: (arrays(v), v) for k, v in test.items()}, train)
    processor = glue.get_processor(
        task, tsv_text_a_column=FLAGS.tsv_text_a_column,
        tsv_text_b_column=FLAGS.tsv_text_b_column, tsv_label_column=FLAGS.tsv_label_column,
        tsv_labels=FLAGS.tsv_labels, tsv_has_header=FLAGS.tsv_has_header)
    train = processor.train_examples(FLAGS.data_dir) if FLAGS.do_train else []
    dev = processor.dev_sets(FLAGS.data_dir) if FLAGS.do_eval else {}
    test = processor.test_sets(FLAGS.data_dir) if FLAGS.do_predict else {}
    labels = processor.labels  # known once a split is read (tsv takes them from train)

    def arrays(examples, what):
        converted = glue.convert_examples(examples, tokenizer, length, labels)
        if converted.num_truncated:
            logging.info("%s: %d of %d examples truncated to %d tokens", what,
                         converted.num_truncated, len(examples), length)
        return converted.features

    sample = next(iter([*train, *[e for v in dev.values() for e in v]]), None)
    pair = sample is not None and sample.text_b is not None
    return TaskData(processor.name, labels, False, pair,
                    arrays(train, "train") if train else None,
                    {k: (arrays(v, k), v) for k, v in dev.items()},
                    {k: (arrays(v, k), v) for k, v in test.items()}, train)


def _scores(data: TaskData, model) -> dict[str, float]:
    """Dev metrics, prefixed by the dev set's name when there are several (MNLI)."""
    from evaluation import glue as glue_metrics

    results = {}
    for name, (arrays, _) in data.dev.items():
        predictions = finetuning.predict(model, arrays, FLAGS.eval_batch_size)
        task = "swag" if data.multiple_choice else data.name
        metrics = glue_metrics.compute_metrics(task, predictions, arrays["label_ids"])
        metrics["score"] = (metrics["accuracy"] if data.multiple_choice
                            else glue_metrics.glue_score(task, metrics))
        prefix = "eval" if len(data.dev) == 1 else name
        results.update({f"{prefix}_{key}": value for key, value in metrics.items()})
    return results


def _model_fn(setup, data: TaskData):
    from modeling.task_models import BertClassifier, BertMultipleChoice

    if data.multiple_choice:
        return lambda: BertMultipleChoice(setup.config)
    return lambda: BertClassifier(setup.config, num_labels=len(data.labels or [None]),
                                  causal=FLAGS.causal, lm_aux_weight=FLAGS.lm_aux_weight)


def _sweep(setup, data: TaskData):
    """Fine-tunes every (learning rate, restart); returns the best model and the table rows.

    A run that diverges is listed as such and never chosen: its weights are
    NaN, and a too-high rate in a sweep should cost one row, not the sweep.
    """
    import keras

    from modeling.task_models import classification_loss, regression_loss
    from training.loop import TrainingDiverged

    loss_fn = regression_loss if data.labels is None and not data.multiple_choice \
        else classification_loss
    rates = [float(rate) for rate in FLAGS.learning_rates] or [FLAGS.learning_rate]
    runs = [(rate, restart) for rate in rates for restart in range(FLAGS.num_restarts)]
    best, rows = None, []
    for rate, restart in runs:
        run_dir = FLAGS.output_dir if len(runs) == 1 else os.path.join(
            FLAGS.output_dir, "runs", f"lr{rate:g}_restart{restart}")
        keras.utils.set_random_seed(FLAGS.random_seed + restart)
        model = finetuning.build_model(setup.strategy, _model_fn(setup, data),
                                       FLAGS.init_checkpoint)
        try:
            finetuning.train(model, setup.strategy, data.train, loss_fn, run_dir,
                             seed=FLAGS.random_seed + restart, learning_rate=rate)
        except TrainingDiverged as error:
            if len(runs) == 1:
                raise
            rows.append((rate, restart, math.nan, {}, f"diverged at step {error.step}"))
            logging.warning("learning rate %g, restart %d: %s", rate, restart, error)
            continue
        scores = _scores(data, model) if data.dev else {}
        score = np.mean([v for k, v in scores.items() if k.endswith("_score")]) \
            if scores else 0.0
        rows.append((rate, restart, score, scores, "finished"))
        logging.info("learning rate %g, restart %d: dev score %.4f", rate, restart, score)
        if best is None or score > best[0]:
            best = (score, model, (rate, restart))
    if best is None:
        _write_sweep_table(rows, None)
        runs_text = ", ".join(f"{rate:g} (restart {restart}) {status}"
                              for rate, restart, _, _, status in rows)
        raise ValueError(f"every run of the sweep diverged: {runs_text}; see "
                         f"{os.path.join(FLAGS.output_dir, 'sweep_results.tsv')} and pass "
                         "lower --learning_rates")
    return best[1], best[2], rows


def _write_sweep_table(rows, chosen) -> None:
    from training.cli import write_text_atomically

    keys = sorted({key for _, _, _, scores, _ in rows for key in scores})
    lines = ["\t".join(["learning_rate", "restart", "dev_score", *keys, "status", "chosen"])]
    for rate, restart, score, scores, status in rows:
        lines.append("\t".join([f"{rate:g}", str(restart), f"{score:.4f}",
                                *(f"{scores.get(key, float('nan')):.4f}" for key in keys),
                                status, "*" if (rate, restart) == chosen else ""]))
    write_text_atomically(os.path.join(FLAGS.output_dir, "sweep_results.tsv"),
                          "\n".join(lines) + "\n")


def _write_submissions(data: TaskData, model) -> None:
    from data_prep.datasets import glue
    from training.cli import write_text_atomically

    folder = os.path.join(FLAGS.output_dir, "submission")
    for stem, (arrays, examples) in data.test.items():
        majority = None
        if stem == "WNLI" and FLAGS.wnli_majority_class:
            majority = glue.majority_class(data.train_examples)
        predictions = finetuning.predict(model, arrays, FLAGS.predict_batch_size)
        if data.multiple_choice:
            rows = ["id\tprediction"] + [f"{example.guid}\t{int(choice)}" for example, choice
                                          in zip(examples, predictions.argmax(-1))]
            write_text_atomically(os.path.join(folder, f"{stem}.tsv"), "\n".join(rows) + "\n")
            continue
        glue.write_submission(folder, stem, predictions, data.labels,
                              indices=[example.guid for example in examples],
                              majority_label=majority)
        logging.info("Wrote %s/%s.tsv (%d rows)", folder, stem, len(examples))


def _check_flags(values: flags.FlagValues = FLAGS) -> None:
    """The task's own flags; `finetuning.setup` checks the shared ones."""
    for name in ("task_name", "data_dir"):
        if not values[name].value:
            raise ValueError(f"--{name} is required")
    runner_flags.check_ranges(values, positive=("num_restarts",),
                              non_negative=("lm_aux_weight",))
    runner_flags.parse_learning_rates(values.learning_rates)


def main(argv: list[str]) -> None:
    del argv
    _check_flags()
    setup = finetuning.setup()
    from training import cli

    data = _load_task(setup.tokenizer)
    if FLAGS.do_train:
        model, chosen, rows = _sweep(setup, data)
        _write_sweep_table(rows, chosen)
        finetuning.save_model_files(model, setup.config, FLAGS.output_dir)
    else:
        model = finetuning.build_model(setup.strategy, _model_fn(setup, data),
                                       FLAGS.init_checkpoint)
    if FLAGS.do_eval:
        results = _scores(data, model)
        cli.write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
        for key, value in sorted(results.items()):
            logging.info("  %s = %.4f", key, value)
    if FLAGS.do_predict:
        _write_submissions(data, model)
    if FLAGS.do_train and FLAGS.export_saved_model and not data.multiple_choice:
        from training.serving import export_classifier

        path = export_classifier(model, setup.tokenizer, FLAGS.max_seq_length, data.labels,
                                 data.pair, os.path.join(FLAGS.output_dir, "saved_model"))
        logging.info("Exported %s (serving signature takes raw strings)", path)


if __name__ == "__main__":
    from training.cli import run

    run(main)
