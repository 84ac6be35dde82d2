"""A tf.distribute strategy and a Keras precision policy from the runners' flags.

The strategies differ in how they find their devices:

- "one_device": the first GPU if `num_gpus` > 0, else the CPU;
- "mirrored": `num_gpus` GPUs of this machine; with `num_gpus=0`, every
  logical CPU device (one unless `tf.config.set_logical_device_configuration`
  split the CPU, which is how tests exercise replica logic without GPUs);
- "multi_worker_mirrored": the cluster that the `TF_CONFIG` environment
  variable describes (without it, a cluster of this one worker);
- "tpu": a Cloud TPU by name, a gRPC address (`grpc://host:port`, or
  plain `host:port`), or the local TPU VM.

Connecting to an address where no TPU listens blocks indefinitely inside
TensorFlow (gRPC retries a refused connection), so a `host:port` address is
first tried with a plain TCP connection, which fails at once on a closed
port or an unknown host, and the connection itself runs in a daemon thread
that is abandoned after `tpu_timeout_s`; either error names the address and
the timeout.
"""

from __future__ import annotations

import re
import socket
import threading

import keras
import tensorflow as tf

from core.arguments import FieldError, FieldMessage

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# Widest model whose float32 CPU training step XLA made faster in
# `benchmarks/training_speed.py` (figures: benchmarks/results/training_speed.md,
# "XLA on a CPU"). BERT-Base gained only once the runners kept freed pages
# (`core.host_memory`), since XLA's step allocates more anew; wider models were
# not measured and stay outside XLA.
XLA_CPU_MAX_HIDDEN_SIZE = 768


class TpuTimeout(FieldMessage, TimeoutError):
    """No TPU answered at the address `tpu` names within `tpu_timeout_s`."""


class TpuUnreachable(FieldMessage, ConnectionError):
    """Nothing at the address `tpu` names accepts a connection, or it is no TPU."""


def get_strategy(distribution_strategy: str = "one_device", num_gpus: int = 0,
                 tpu: str | None = None, tpu_timeout_s: float = 60) -> tf.distribute.Strategy:
    """Builds the strategy named by `distribution_strategy`.

    Call it first thing: "multi_worker_mirrored" configures collective ops,
    which TensorFlow refuses once it has run any op, and logical devices
    must be set up before that too.
    """
    if distribution_strategy not in STRATEGIES:
        raise FieldError("unknown {distribution_strategy} {0!r}; expected one of {1}",
                         distribution_strategy, ", ".join(STRATEGIES))
    if num_gpus < 0:
        raise FieldError("{num_gpus} must be >= 0, got {0}", num_gpus)
    if distribution_strategy == "tpu":
        return _tpu_strategy(tpu, tpu_timeout_s)
    if distribution_strategy == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    _check_gpus(num_gpus)
    if distribution_strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    if num_gpus:
        devices = [f"/gpu:{index}" for index in range(num_gpus)]
    else:
        devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)


def _check_gpus(num_gpus: int) -> None:
    available = len(tf.config.list_physical_devices("GPU"))
    if num_gpus > available:
        raise FieldError("{num_gpus}={0}, but TensorFlow sees {1} GPU(s)", num_gpus, available)


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d+$")


def tpu_address(tpu: str | None) -> str | None:
    """`tpu` as TPUClusterResolver reads it: a bare `host:port` becomes `grpc://host:port`.

    The resolver takes anything without `grpc://` for a Cloud TPU name and
    asks the cloud metadata service about it, failing long after with a
    traceback that never mentions the address.
    """
    if tpu and _HOST_PORT.match(tpu):
        return f"grpc://{tpu}"
    return tpu


def _tpu_strategy(tpu: str | None, timeout_s: float) -> tf.distribute.TPUStrategy:
    """Resolves, connects to and initializes the TPU, giving up after `timeout_s`."""
    tpu = tpu_address(tpu)
    if tpu and tpu.startswith("grpc://") and _HOST_PORT.match(tpu.removeprefix("grpc://")):
        _check_reachable(tpu, timeout_s)
    outcome: dict[str, object] = {}

    def connect() -> None:
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
            if tpu not in (None, "", "local"):
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            outcome["resolver"] = resolver
        except Exception as error:  # re-raised in the caller's thread below
            outcome["error"] = error

    where = tpu or "the local TPU"
    thread = threading.Thread(target=connect, name="tpu-connect", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TpuTimeout("no TPU answered at {0} within {1:g} s ({tpu_timeout_s}={1:g}); check "
                         "{tpu} and that the TPU is running and reachable from this machine",
                         where, timeout_s)
    if "error" in outcome:
        first_line = (str(outcome["error"]).strip().splitlines() or ["no detail"])[0]
        raise TpuUnreachable("could not connect to the TPU at {0}: {1}; check {tpu}", where,
                             first_line) from outcome["error"]
    return tf.distribute.TPUStrategy(outcome["resolver"])


def _check_reachable(address: str, timeout_s: float) -> None:
    """Raises ConnectionError, without waiting for `timeout_s`, if nothing accepts TCP
    connections at the gRPC `address`."""
    host, _, port = address.removeprefix("grpc://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except (OSError, OverflowError) as error:  # OverflowError: a port past 65535
        reason = "timed out" if isinstance(error, TimeoutError) else (
            getattr(error, "strerror", None) or error)
        raise TpuUnreachable("could not reach a TPU at {0} within {1:g} s ({tpu_timeout_s}={1:g}): "
                             "{2}; check {tpu} and that the TPU is running and reachable from "
                             "this machine", address, timeout_s, reason) from None


def set_precision(dtype: str = "float32") -> keras.DTypePolicy:
    """Sets Keras' global dtype policy from `dtype` and returns it.

    Must run before the model is built. Mixed policies compute in 16 bits and
    keep variables in float32; with "mixed_float16", `training.training_run` wraps
    the optimizer in a `LossScaleOptimizer` so small gradients do not
    underflow (bfloat16 has float32's range and needs no loss scaling).
    """
    if dtype not in PRECISIONS:
        raise FieldError("unknown {dtype} {0!r}; expected one of {1}", dtype,
                         ", ".join(PRECISIONS))
    keras.mixed_precision.set_dtype_policy(dtype)
    return keras.mixed_precision.dtype_policy()


def default_jit_compile(strategy: tf.distribute.Strategy, dtype: str, hidden_size: int) -> bool:
    """Whether the training step is compiled with XLA when `jit_compile` is not given.

    XLA fuses the element-wise work between matrix products (dropout, GELU,
    softmax, LayerNorm, the optimizer update), which pays off where that work
    is a large share of the step: models up to BERT-Base size on a CPU, and
    GPUs (where Keras' own `jit_compile="auto"` compiles too; not measured
    here). On a CPU it loses in 16-bit precision, whose products oneDNN
    runs on the CPU's bfloat16 units outside XLA only (figures:
    benchmarks/results/training_speed.md). Several replicas all-reduce inside the step;
    compiling that is left to the flag.
    """
    if strategy.num_replicas_in_sync != 1:
        return False
    try:
        placed_on = strategy.extended.worker_devices[0]
    except RuntimeError:  # the default strategy places ops on the first GPU, else the CPU
        placed_on = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
    device = tf.DeviceSpec.from_string(placed_on).device_type
    if device == "GPU":
        return True
    return device == "CPU" and dtype == "float32" and hidden_size <= XLA_CPU_MAX_HIDDEN_SIZE
