"""What a training run needs to know, as typed values instead of global flags.

The runners build these from their flags; a notebook, a test or an
experiment driver builds them directly. Each refuses a value that would
start a run that exits 0 with an untrained or wrong model, with a
`core.arguments.FieldError` naming the field: bare from Python, `--field`
from a command line, whose flags have the fields' names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

from core.arguments import FieldError, check_integer, check_number
from training import distribution
from training.distribution import PRECISIONS, STRATEGIES
from training.optimization import OPTIMIZER_TYPES, plan

MAX_SEED = 2**32 - 1


def check_weights_to_evaluate(evaluates: Sequence[str], do_train: bool,
                              init_checkpoint: str | None, resume_dir: str | None = None) -> None:
    """Refuses to score the weights a run starts from when nothing gives it trained ones.

    Without training, a checkpoint to load or (pre-training) one to resume
    in `resume_dir`, the model keeps its random initialization and the run
    would report chance-level scores with exit 0.

    Args:
      evaluates: the fields asking for scores, e.g. ("do_eval",).
      do_train: whether the run trains first.
      init_checkpoint: the weights it starts from, if any.
      resume_dir: where a pre-training run resumes from, if it does.
    """
    if do_train or init_checkpoint:
        return
    if resume_dir and tf.train.latest_checkpoint(resume_dir):
        return
    asking = " and ".join(f"{{{field}}}" for field in evaluates)
    held = ": {output_dir}={0} holds no checkpoint" if resume_dir else ""
    raise FieldError(f"{asking} without {{do_train}} would evaluate random weights{held}; "
                     "pass {init_checkpoint} or {do_train}", resume_dir)


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
    """The optimizer and its warmup-then-linear-decay schedule.

    The length of training is either `num_train_steps` optimizer updates
    (pre-training) or `num_train_epochs` passes over the data (fine-tuning),
    with warmup given as updates or as a share of them.
    """

    learning_rate: float = 5e-5  # peak learning rate
    optimizer: str = "adamw"  # adamw (the original) or lamb
    gradient_accumulation_steps: int = 1  # micro-batches averaged per update
    num_train_steps: int | None = None  # updates; None: from num_train_epochs
    num_warmup_steps: int | None = None  # warmup updates; None: from warmup_proportion
    num_train_epochs: float | None = 3.0  # passes over the data when num_train_steps is None
    warmup_proportion: float = 0.1  # share of the updates with linear warmup
    adam_bias_correction: bool = False  # AdamW with Adam's bias correction; False: the original

    def __post_init__(self) -> None:
        check_number("learning_rate", self.learning_rate, 0, above=True)
        if self.optimizer not in OPTIMIZER_TYPES:
            raise FieldError(f"{{optimizer}} must be one of {', '.join(OPTIMIZER_TYPES)}, "
                             "got {0!r}", self.optimizer)
        check_integer("gradient_accumulation_steps", self.gradient_accumulation_steps)
        if self.num_train_steps is not None:
            check_integer("num_train_steps", self.num_train_steps)
        if self.num_warmup_steps is not None:
            check_integer("num_warmup_steps", self.num_warmup_steps, minimum=0)
        if self.num_train_epochs is not None:
            check_number("num_train_epochs", self.num_train_epochs, 0, above=True)
        # A share outside [0, 1] gives a schedule that never peaks or never ends warming up.
        check_number("warmup_proportion", self.warmup_proportion, 0, 1)

    def schedule(self, examples: int | None, batch_size: int) -> tuple[int, int]:
        """(updates, warmup updates): fixed steps, or epochs over `examples` in `batch_size`.

        Counted by `training.optimization.plan`, as the runners read their data:
        one repeated stream cut into whole batches, `examples / batch_size` per epoch.
        """
        if self.num_train_steps is not None:
            updates, warmup = plan(self.num_train_steps, 1, self.warmup_proportion)
        elif self.num_train_epochs is not None and examples is not None:
            updates, warmup = plan(examples / batch_size, self.num_train_epochs,
                                   self.warmup_proportion)
        else:
            raise FieldError("neither {num_train_steps} nor {num_train_epochs} says how long "
                             "to train")
        return updates, warmup if self.num_warmup_steps is None else self.num_warmup_steps


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Where a run writes, how it batches, and how often it saves and reports."""

    output_dir: str  # checkpoints, logs and results
    max_seq_length: int = 128  # packed sequence length
    train_batch_size: int = 32  # examples per optimizer update
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    save_checkpoints_steps: int = 1000  # updates between checkpoints
    keep_checkpoint_max: int = 5  # checkpoints kept
    log_every: int = 100  # updates between progress lines and TensorBoard points
    iterations_per_loop: int | None = None  # steps per tf.function call; None: as often as due
    random_seed: int = 12345  # input order, dropout and initialization
    dtype: str = "float32"  # compute precision; mixed_float16 adds loss scaling
    jit_compile: bool | None = None  # XLA for the training step; None: where it is faster

    def __post_init__(self) -> None:
        for name in ("max_seq_length", "train_batch_size", "eval_batch_size",
                     "predict_batch_size", "save_checkpoints_steps", "keep_checkpoint_max",
                     "log_every"):
            check_integer(name, getattr(self, name))
        check_integer("random_seed", self.random_seed, minimum=0)
        if self.random_seed > MAX_SEED:  # NumPy's seeds; Keras seeds NumPy with it
            raise FieldError("{random_seed} must be at most 2**32 - 1, got {0}", self.random_seed)
        if self.iterations_per_loop is not None:
            check_integer("iterations_per_loop", self.iterations_per_loop)
        if self.dtype not in PRECISIONS:
            raise FieldError(f"{{dtype}} must be one of {', '.join(PRECISIONS)}, got {{0!r}}",
                             self.dtype)


def check_batch_split(training: TrainingConfig, optimization: OptimizationConfig) -> None:
    """Micro-batches must split the batch exactly: a floored split would train on a smaller one."""
    batch, accumulation = training.train_batch_size, optimization.gradient_accumulation_steps
    if batch % accumulation:
        raise FieldError("{train_batch_size}={0} is not divisible by "
                         "{gradient_accumulation_steps}={1}", batch, accumulation)


@dataclasses.dataclass(frozen=True)
class DistributionConfig:
    """Which devices train: the tf.distribute strategy and how to reach them."""

    distribution_strategy: str = "one_device"  # see training.distribution.STRATEGIES
    num_gpus: int = 0  # GPUs for one_device / mirrored
    tpu: str | None = None  # TPU name or gRPC address with distribution_strategy=tpu
    tpu_timeout_s: int = 120  # give up connecting to the TPU after this long
    cpu_replicas: int = 0  # logical CPU devices, to try `mirrored` without GPUs

    def __post_init__(self) -> None:
        if self.distribution_strategy not in STRATEGIES:
            raise FieldError(f"{{distribution_strategy}} must be one of {', '.join(STRATEGIES)}, "
                             "got {0!r}", self.distribution_strategy)
        check_integer("tpu_timeout_s", self.tpu_timeout_s)
        check_integer("num_gpus", self.num_gpus, minimum=0)
        check_integer("cpu_replicas", self.cpu_replicas, minimum=0)

    def strategy(self) -> tf.distribute.Strategy:
        """The strategy; call before any other TensorFlow work (collectives, logical CPUs)."""
        if self.cpu_replicas:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * self.cpu_replicas)
        return distribution.get_strategy(self.distribution_strategy, self.num_gpus, self.tpu,
                                         self.tpu_timeout_s)
