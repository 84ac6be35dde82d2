"""What the fine-tuning runners share: flags, setup, training on arrays, prediction.

`run_classifier.py`, `run_squad.py` and `run_ner.py` differ in how they read
their data and score predictions; the rest is here once: the original's
flags, the model's config and tokenizer, a pre-trained checkpoint loaded
into a fresh task model, training with AdamW, warmup over the first
`warmup_proportion` of the steps and linear decay (Section 4 / Appendix
A.3 of the paper), on any strategy through `training.loop.Trainer`, and
batched prediction.

Features are numpy arrays in a dict (`input_ids`, `input_mask`,
`segment_ids` plus the task's label arrays); a task's loss function reads
its labels from the same dict.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import weakref
from typing import Callable

import numpy as np
from absl import flags, logging

from training import runner_flags

FLAGS = flags.FLAGS


def define_flags(max_seq_length: int = 128, learning_rate: float = 5e-5,
                 num_train_epochs: float = 3.0, train_batch_size: int = 32,
                 flag_values: flags.FlagValues = FLAGS) -> None:
    """The original runners' shared flags, with each runner's own defaults.

    `flag_values` lets tests check the flags in a fresh `FlagValues`, since
    two runners cannot define the same flags in one process.
    """
    where = {"flag_values": flag_values}
    flags.DEFINE_string("bert_config_file", None, "Google bert_config.json or HF config.json.",
                        **where)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the checkpoint.", **where)
    flags.DEFINE_string("init_checkpoint", None,
                        "Google, Hugging Face or own checkpoint (random init when unset).", **where)
    flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased models).",
                      **where)
    flags.DEFINE_string("output_dir", None, "Checkpoints, predictions and results go here.",
                        **where)
    flags.DEFINE_bool("do_train", False, "Fine-tune on the training set.", **where)
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.", **where)
    flags.DEFINE_bool("do_predict", False, "Predict the test set.", **where)
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Packed sequence length.", **where)
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Training batch size.", **where)
    flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.", **where)
    flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.", **where)
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.", **where)
    flags.DEFINE_float("num_train_epochs", num_train_epochs, "Passes over the training set.",
                       **where)
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with linear warmup.", **where)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.", **where)
    flags.DEFINE_integer("log_every", 50, "Steps between progress lines.", **where)
    flags.DEFINE_integer("random_seed", 12345, "Seed for shuffling, dropout and the new head.",
                         **where)
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per update; must divide --train_batch_size.", **where)
    runner_flags.define_distribution_flags(flag_values)


@dataclasses.dataclass
class Setup:
    strategy: object
    config: object
    tokenizer: object


def check_flags(values: flags.FlagValues = FLAGS,
                require: tuple[str, ...] = ("bert_config_file", "vocab_file", "output_dir")
                ) -> None:
    """Refuses missing or out-of-range shared flags before any file is read or written."""
    for name in require:
        if not values[name].value:
            raise ValueError(f"--{name} is required")
    if not (values.do_train or values.do_eval or values.do_predict):
        raise ValueError("at least one of --do_train, --do_eval, --do_predict must be set")
    runner_flags.check_ranges(
        values,
        positive=("max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
                  "learning_rate", "save_checkpoints_steps", "log_every",
                  *runner_flags.DISTRIBUTION_POSITIVE)
        + (("num_train_epochs",) if values.do_train else ()),
        non_negative=runner_flags.DISTRIBUTION_NON_NEGATIVE, fractions=("warmup_proportion",))
    runner_flags.check_accumulation(values)


def setup(require: tuple[str, ...] = ("bert_config_file", "vocab_file", "output_dir")) -> Setup:
    """Checks the shared flags and builds the strategy, config and tokenizer."""
    check_flags(FLAGS, require)
    if "output_dir" in require:
        runner_flags.check_output_dir(FLAGS.output_dir)
    strategy = runner_flags.strategy_from_flags()

    from data_prep.text.tokenization import FullTokenizer
    from modeling.config import BertConfig
    from training import atomic, loop

    if "output_dir" in require and loop.is_chief(strategy):
        atomic.remove_dead_temporaries(FLAGS.output_dir)

    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} exceeds "
                         f"max_position_embeddings={config.max_position_embeddings} of "
                         f"{FLAGS.bert_config_file}")
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"{FLAGS.vocab_file} holds {tokenizer.vocab_size} tokens but "
                         f"{FLAGS.bert_config_file} says vocab_size={config.vocab_size}")
    return Setup(strategy, config, tokenizer)


def build_model(strategy, model_fn: Callable[[], object], init_checkpoint: str | None):
    """The task model inside the strategy's scope, with the pre-trained weights loaded."""
    from modeling.checkpoints import load_weights

    with strategy.scope():
        model = model_fn()
    if init_checkpoint:
        report = load_weights(model, init_checkpoint)
        logging.info(report.summary())
    else:
        logging.warning("No --init_checkpoint: the encoder starts from random weights")
    return model


def train(model, strategy, arrays: dict[str, np.ndarray], loss_fn, output_dir: str,
          seed: int, learning_rate: float | None = None,
          checkpoint_name: str = "checkpoints") -> None:
    """Fine-tunes `model` on `arrays` for `--num_train_epochs` with the paper's schedule.

    `learning_rate` overrides `--learning_rate` (for sweeps); `seed` orders the data.
    A run killed at any point and started again resumes from its newest
    checkpoint and ends with the same weights. Raises `loop.TrainingDiverged`
    (a ValueError) when the loss or gradients stop being finite, so a sweep
    can skip that rate and a lone run exits with the step and checkpoint.
    """
    import tensorflow as tf

    from training import loop
    from training.optimization import create_optimizer

    examples = len(next(iter(arrays.values())))
    batch = FLAGS.train_batch_size
    if examples < batch:
        raise ValueError(f"{examples} training examples cannot fill one batch of "
                         f"--train_batch_size={batch}")
    accumulation = FLAGS.gradient_accumulation_steps
    updates = max(1, int(examples / batch * FLAGS.num_train_epochs))
    micro_batch = batch // accumulation
    with strategy.scope():
        optimizer = create_optimizer(learning_rate or FLAGS.learning_rate, updates,
                                     int(updates * FLAGS.warmup_proportion),
                                     gradient_accumulation_steps=accumulation)
        if FLAGS.dtype == "mixed_float16":
            import keras
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        trainer = loop.Trainer(model, optimizer, strategy, loss_fn,
                               os.path.join(output_dir, checkpoint_name), max_to_keep=1,
                               jit_compile=FLAGS.jit_compile)
    total = updates * accumulation
    logging.info("Fine-tuning on %d examples: %d updates of %d", examples, updates, batch)

    def build(context):
        data = tf.data.Dataset.from_tensor_slices(arrays)
        if context is not None and context.num_input_pipelines > 1:
            data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        per_replica = context.get_per_replica_batch_size(micro_batch) if context else micro_batch
        data = data.shuffle(examples, seed=seed, reshuffle_each_iteration=True).repeat()
        return data.batch(per_replica, drop_remainder=True).skip(trainer.step).prefetch(2)

    callbacks = [loop.CheckpointEvery(trainer, FLAGS.save_checkpoints_steps * accumulation, total),
                 loop.ProgressLogger(optimizer, total, micro_batch, FLAGS.log_every,
                                     os.path.join(output_dir, "logs", "train")
                                     if trainer.chief else None, first_step=trainer.step)]
    # Several steps per tf.function call, ending exactly where a checkpoint or
    # progress line is due, spare the per-call overhead of a step at a time.
    steps_per_loop = np.gcd(FLAGS.save_checkpoints_steps * accumulation, max(1, FLAGS.log_every))
    trainer.train(strategy.distribute_datasets_from_function(build), total, int(steps_per_loop),
                  callbacks)


_PREDICT_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def predict(model, arrays: dict[str, np.ndarray], batch_size: int,
            keys: tuple[str, ...] = ("input_ids", "input_mask", "segment_ids")):
    """The model's outputs for every row of `arrays`, in order, as numpy (dicts kept).

    The last batch is padded to `batch_size` so that one traced function
    serves every batch of every call for this model.
    """
    import tensorflow as tf

    if model not in _PREDICT_FUNCTIONS:
        _PREDICT_FUNCTIONS[model] = tf.function(lambda features: model(features, training=False))
    call = _PREDICT_FUNCTIONS[model]
    count = len(arrays[keys[0]])
    if not count:
        raise ValueError("nothing to predict: no examples")
    outputs = []
    for start in range(0, count, batch_size):
        batch = {key: arrays[key][start:start + batch_size] for key in keys}
        rows = len(batch[keys[0]])
        if rows < batch_size:
            batch = {key: np.concatenate([value, np.zeros((batch_size - rows, *value.shape[1:]),
                                                          value.dtype)])
                     for key, value in batch.items()}
        result = call({key: tf.constant(value) for key, value in batch.items()})
        outputs.append(tf.nest.map_structure(lambda tensor: tensor.numpy()[:rows], result))
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts), *outputs)


def save_model_files(model, config, output_dir: str) -> None:
    """The fine-tuned model in this project's format, with its config and vocabulary."""
    from modeling.checkpoints import save_checkpoint

    save_checkpoint(model, os.path.join(output_dir, "model.ckpt"))
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    shutil.copyfile(FLAGS.vocab_file, os.path.join(output_dir, "vocab.txt"))


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=-1, keepdims=True)
