"""Pre-trains BERT (masked LM + next sentence) or one of the paper's ablations.

Flags keep the original `run_pretraining.py` names. Objectives:
`mlm_nsp` (the paper), `mlm` (Table 5's "No NSP"), `ltr` (a causal encoder
predicting every next token: the left-to-right "LTR & No NSP" model).

The paper's two phases (Appendix A.2) are two runs: phase 1 at
`--max_seq_length=128`, then phase 2 at 512 on records written at 512 with
`--init_checkpoint=<phase 1 output_dir>`. Position embeddings are sized by
`max_position_embeddings` (512) from the start, so phase 2 loads every
weight of phase 1; its optimizer state and schedule start afresh.

A killed run restarts from the newest checkpoint in `--output_dir` (model,
optimizer, step) and continues with the batch it would have read next.
Outputs: checkpoints, `eval_results.txt`, `bert_config.json`, `vocab.txt`
(with `--vocab_file`), TensorBoard logs, and `export/bert_model.ckpt` with
Google's variable names for the original scripts.
"""

from __future__ import annotations

import math
import os
import shutil

from absl import flags, logging

from training import atomic, runner_flags

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """The original script's flags plus ours, in `flag_values`.

    Defined when the file runs as a script, so that importing it (tests,
    notebooks) registers nothing in absl's global registry, where another
    runner's flags of the same names may already be.
    """
    into = {"flag_values": flag_values}
    flags.DEFINE_string("input_file", None, "TFRecord files: glob or comma-separated globs.",
                        **into)
    flags.DEFINE_string("eval_input_file", None,
                        "Evaluation records (default: --input_file).", **into)
    flags.DEFINE_string("bert_config_file", None, "Google bert_config.json or HF config.json.",
                        **into)
    flags.DEFINE_string("output_dir", None, "Checkpoints, logs and results go here.", **into)
    flags.DEFINE_string("init_checkpoint", None,
                        "Google, Hugging Face or own checkpoint to start from.", **into)
    flags.DEFINE_string("vocab_file", None, "Copied next to the exported model when given.",
                        **into)
    flags.DEFINE_bool("do_train", False, "Train.", **into)
    flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_input_file (or --input_file).",
                      **into)
    flags.DEFINE_enum("objective", "mlm_nsp", ["mlm_nsp", "mlm", "ltr"],
                      "Pre-training objective.", **into)
    flags.DEFINE_integer("train_batch_size", 32, "Global batch size per optimizer update.",
                         **into)
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.", **into)
    flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.", **into)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.", **into)
    flags.DEFINE_integer("num_train_steps", 100000, "Optimizer updates.", **into)
    flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warmup updates.", **into)
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.", **into)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "AdamW (the original) or LAMB.",
                      **into)
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per update; each is train_batch_size / this.", **into)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Updates between checkpoints.", **into)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.", **into)
    flags.DEFINE_integer("iterations_per_loop", 1,
                         "Steps per tf.function call (steps_per_execution).", **into)
    flags.DEFINE_integer("log_every", 100,
                         "Updates between progress lines and TensorBoard points.", **into)
    flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches.", **into)
    flags.DEFINE_integer("random_seed", 12345,
                         "Seed for input order, dropout and initialization.", **into)
    runner_flags.define_distribution_flags(flag_values)


def _check_flags(values: flags.FlagValues = FLAGS) -> None:
    """Refuses flags that would fail late or, worse, give a run that exits 0 with a wrong result."""
    for name in ("input_file", "bert_config_file", "output_dir"):
        if not values[name].value:
            raise ValueError(f"--{name} is required")
    if not (values.do_train or values.do_eval):
        raise ValueError("at least one of --do_train and --do_eval must be set")
    runner_flags.check_ranges(
        values,
        positive=("train_batch_size", "eval_batch_size", "max_seq_length", "num_train_steps",
                  "learning_rate", "save_checkpoints_steps", "keep_checkpoint_max",
                  "iterations_per_loop", "log_every", "max_eval_steps",
                  *runner_flags.DISTRIBUTION_POSITIVE),
        non_negative=("num_warmup_steps", "max_predictions_per_seq",
                      *runner_flags.DISTRIBUTION_NON_NEGATIVE))
    runner_flags.check_accumulation(values)
    if values.max_predictions_per_seq > values.max_seq_length:
        raise ValueError("--max_predictions_per_seq cannot exceed --max_seq_length")
    if values.do_eval and not values.do_train and not values.init_checkpoint:
        import tensorflow as tf

        if not tf.train.latest_checkpoint(values.output_dir):
            raise ValueError(f"--do_eval without --do_train would evaluate random weights: "
                             f"--output_dir={values.output_dir} holds no checkpoint; pass "
                             "--init_checkpoint or --do_train, or an --output_dir of a "
                             "pre-training run")


def main(argv: list[str]) -> None:
    del argv
    _check_flags()
    runner_flags.check_output_dir(FLAGS.output_dir)
    # The strategy comes first: multi-worker collectives must be set up before any op runs.
    strategy = runner_flags.strategy_from_flags()

    import keras

    from modeling.checkpoints import export_google_checkpoint, load_weights
    from modeling.config import BertConfig
    from modeling.pretrainer import (BertPretrainer, pretraining_losses,
                                    pretraining_metric_sums)
    from training import cli, loop
    from training.input_pipeline import naming_corrupt_records, pretraining_dataset
    from training.optimization import create_optimizer

    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} exceeds "
                         f"max_position_embeddings={config.max_position_embeddings} of "
                         f"{FLAGS.bert_config_file}")
    keras.utils.set_random_seed(FLAGS.random_seed)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    accumulation = FLAGS.gradient_accumulation_steps
    micro_batch = FLAGS.train_batch_size // accumulation
    total_micro_steps = FLAGS.num_train_steps * accumulation

    def dataset(file_pattern, batch_size, is_training, skip=0):
        def build(context):
            data = pretraining_dataset(file_pattern, batch_size, FLAGS.max_seq_length,
                                       FLAGS.max_predictions_per_seq, is_training,
                                       input_context=context, seed=FLAGS.random_seed)
            return data.skip(skip) if skip else data
        return strategy.distribute_datasets_from_function(build)

    objective = FLAGS.objective
    with strategy.scope():
        model = BertPretrainer(config, objective=objective)
        optimizer = create_optimizer(FLAGS.learning_rate, FLAGS.num_train_steps,
                                     FLAGS.num_warmup_steps, FLAGS.optimizer,
                                     gradient_accumulation_steps=accumulation)
        if FLAGS.dtype == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        trainer = loop.Trainer(model, optimizer, strategy,
                               lambda features, outputs: pretraining_losses(
                                   features, outputs, objective),
                               FLAGS.output_dir, FLAGS.keep_checkpoint_max, FLAGS.jit_compile)
    if trainer.restored_from:
        logging.info("Resuming from %s at step %d", trainer.restored_from, trainer.step)
    elif FLAGS.init_checkpoint:
        logging.info(load_weights(model, FLAGS.init_checkpoint).summary())

    chief = trainer.chief
    if FLAGS.do_train and trainer.step < total_micro_steps:
        callbacks = [loop.CheckpointEvery(trainer, FLAGS.save_checkpoints_steps * accumulation,
                                          total_micro_steps),
                     loop.ProgressLogger(optimizer, total_micro_steps, micro_batch,
                                         FLAGS.log_every * accumulation,
                                         os.path.join(FLAGS.output_dir, "logs", "train")
                                         if chief else None, first_step=trainer.step)]
        with naming_corrupt_records(FLAGS.input_file):
            trainer.train(dataset(FLAGS.input_file, micro_batch, True, skip=trainer.step),
                          total_micro_steps, FLAGS.iterations_per_loop, callbacks)
    global_step = trainer.step // accumulation

    if FLAGS.do_eval:
        eval_input = FLAGS.eval_input_file or FLAGS.input_file
        with naming_corrupt_records(eval_input):
            results = trainer.evaluate(
                dataset(eval_input, FLAGS.eval_batch_size, False),
                lambda features, outputs: pretraining_metric_sums(features, outputs, objective),
                FLAGS.max_eval_steps)
        loss_key = "lm_loss" if objective == "ltr" else "masked_lm_loss"
        results["perplexity"] = math.exp(min(results[loss_key], 50.0))
        if chief:
            loop.write_scalars(os.path.join(FLAGS.output_dir, "logs", "eval"), global_step,
                               results)
            cli.write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"),
                                   {**results, "global_step": global_step})
        for key, value in sorted(results.items()):
            logging.info("  %s = %s", key, value)

    if chief:
        config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))
        export_dir = os.path.join(FLAGS.output_dir, "export")
        atomic.remove_dead_temporaries(export_dir)
        export_google_checkpoint(model, os.path.join(export_dir, "bert_model.ckpt"))
        config.to_json_file(os.path.join(export_dir, "bert_config.json"))
        if FLAGS.vocab_file:
            for folder in (FLAGS.output_dir, export_dir):
                shutil.copyfile(FLAGS.vocab_file, os.path.join(folder, "vocab.txt"))
    logging.info("final weights checksum: %.6f", runner_flags.weights_checksum(model))


if __name__ == "__main__":
    from training.cli import run

    define_flags()
    run(main)
