"""Flags that every training runner shares, and the strategy they describe.

Defining them once keeps the names and defaults identical across
`run_pretraining.py`, `run_classifier.py`, `run_squad.py` and `run_ner.py`.
"""

from __future__ import annotations

import math
import os
import secrets
from typing import Iterable, Sequence

from absl import flags

from training.distribution import PRECISIONS, STRATEGIES

FLAGS = flags.FLAGS


def define_distribution_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the strategy flags in `flag_values` (tests pass a fresh `FlagValues`)."""
    flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES),
                      "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.",
                      flag_values=flag_values)
    flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.",
                         flag_values=flag_values)
    flags.DEFINE_string("tpu", None, "TPU name, or a gRPC address (grpc://host:port or "
                        "host:port) with --distribution_strategy=tpu; unset on a TPU VM.",
                        flag_values=flag_values)
    flags.DEFINE_integer("tpu_timeout_s", 120, "Give up connecting to the TPU after this long.",
                         flag_values=flag_values)
    flags.DEFINE_integer("cpu_replicas", 0, "Split the CPU into this many logical devices, so "
                         "`mirrored` can be tried without GPUs (testing and debugging).",
                         flag_values=flag_values)
    flags.DEFINE_enum("dtype", "float32", list(PRECISIONS), "Compute precision.",
                      flag_values=flag_values)
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.",
                      flag_values=flag_values)


# Distribution flags whose value must be > 0 or >= 0; checked with each runner's own.
DISTRIBUTION_POSITIVE = ("tpu_timeout_s",)
DISTRIBUTION_NON_NEGATIVE = ("num_gpus", "cpu_replicas")


def check_ranges(values: flags.FlagValues, positive: Iterable[str] = (),
                 non_negative: Iterable[str] = (), fractions: Iterable[str] = ()) -> None:
    """Refuses out-of-range numeric flags before any work starts, naming the flag.

    A zero learning rate, zero epochs or a negative warmup are accepted by
    the training code and give a run that exits 0 with an untrained or
    wrong model; they are caught here instead. NaN and infinity fail every
    check (a float flag parses "nan" and "inf").
    """
    for name in positive:
        value = values[name].value
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"--{name} must be positive, got {value}")
    for name in non_negative:
        value = values[name].value
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"--{name} must be 0 or positive, got {value}")
    for name in fractions:
        value = values[name].value
        if not 0 <= value <= 1:
            raise ValueError(f"--{name} must be in [0, 1], got {value}")


def check_accumulation(values: flags.FlagValues, batch_flag: str = "train_batch_size",
                       accumulation_flag: str = "gradient_accumulation_steps") -> None:
    """Micro-batches must split the batch exactly: a floored split would train on a smaller one."""
    batch, accumulation = values[batch_flag].value, values[accumulation_flag].value
    if accumulation < 1:
        raise ValueError(f"--{accumulation_flag} must be positive, got {accumulation}")
    if batch % accumulation:
        raise ValueError(f"--{batch_flag}={batch} is not divisible by "
                         f"--{accumulation_flag}={accumulation}")


def parse_learning_rates(rates: Sequence[str], flag: str = "learning_rates") -> list[float]:
    """The rates of a comma-separated flag as floats, each one a positive, finite number."""
    parsed = []
    for rate in rates:
        try:
            value = float(rate)
        except ValueError:
            raise ValueError(f"--{flag}: {rate!r} is not a number") from None
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"--{flag}: every rate must be positive, got {rate}")
        parsed.append(value)
    return parsed


def check_output_dir(path: str, flag: str = "output_dir") -> None:
    """Creates the output folder and proves it writable, so a run fails before its work.

    Without this, a folder that cannot be written is reported at the first
    result file, by the name of its temporary file, after training.
    """
    if "://" in path:  # a remote file system: TensorFlow's own writers report errors there
        return
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write-check-{os.getpid()}-{secrets.token_hex(4)}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.remove(probe)
    except OSError as error:
        raise OSError(f"--{flag}={path}: cannot write there ({error.strerror or error}); "
                      "pass a folder you can write to") from None


def strategy_from_flags():
    """The strategy and precision policy the flags ask for; call before any other TF work."""
    import tensorflow as tf

    from training import distribution

    if FLAGS.cpu_replicas:  # a negative count was refused with the other flags
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * FLAGS.cpu_replicas)
    strategy = distribution.get_strategy(FLAGS.distribution_strategy, FLAGS.num_gpus, FLAGS.tpu,
                                         FLAGS.tpu_timeout_s)
    distribution.set_precision(FLAGS.dtype)
    return strategy


def weights_checksum(model) -> float:
    """Sum of |w| over all weights: equal on every worker of a run in lockstep."""
    return float(sum(abs(variable.numpy()).sum() for variable in model.weights))
