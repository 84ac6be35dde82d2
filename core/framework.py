"""The one module that reaches into Keras and TensorFlow internals.

Everything here uses a name the frameworks do not promise to keep. Keeping
those uses together, and checking at import that each still exists, means an
upgrade that moves one stops here with a message naming what moved, rather
than failing deep inside a training step or, worse, silently training
differently (a renamed hook that Keras no longer calls would simply not run).

Each internal is used only where no public API does the same job; the
docstrings below say why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence

import keras
import tensorflow as tf

# The versions requirements.txt pins, where every internal below was checked.
TESTED_WITH = {"keras": "3.15.1", "tensorflow": "2.21.0"}

# Every internal used in this module, by the dotted name it is reached by.
INTERNALS = (
    "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext",
    "tensorflow.__internal__.distribute.interim.maybe_merge_call",
    "tensorflow.python.trackable.constants.OBJECT_GRAPH_PROTO_KEY",
    "tensorflow.python.trackable.constants.VARIABLE_VALUE_KEY",
    "tensorflow.core.protobuf.trackable_object_graph_pb2.TrackableObjectGraph",
    "tensorflow.python.checkpoint.functional_saver.gen_io_ops.merge_v2_checkpoints",
    "tensorflow.python.checkpoint.checkpoint_management.update_checkpoint_state_internal",
    "tensorflow.python.framework.convert_to_constants.convert_variables_to_constants_v2",
    "keras.optimizers.Optimizer._backend_apply_gradients",
    "keras.optimizers.Optimizer._get_current_learning_rate",
    "keras.optimizers.Optimizer._get_variable_index",
    "keras.optimizers.Optimizer._use_weight_decay",
    "keras.layers.Layer._flatten_layers",
    # Reads the `_is_quantized` flag `mark_quantized` sets.
    "keras.layers.Layer._check_quantize_args",
)
# Attributes Keras sets on each instance (no class to check them on at import): read
# through `_instance_internal`, which fails with the same message.
INSTANCE_INTERNALS = {
    "keras.optimizers.Optimizer": ("_iterations", "_learning_rate", "_accumulated_gradients",
                                   "_distribution_strategy"),
    "keras.layers.Layer": ("_seed_generators",),
}


class FrameworkMovedError(RuntimeError):
    """A Keras or TensorFlow internal this package relies on is gone or renamed."""


def moved_error(name: str) -> FrameworkMovedError:
    """The error for a missing internal: what moved, what is installed, what was tested."""
    tested = ", ".join(f"{package}=={version}" for package, version in TESTED_WITH.items())
    return FrameworkMovedError(
        f"{name} is missing in keras {keras.__version__} / tensorflow {tf.__version__}; this "
        f"package relies on it and is tested with {tested} (requirements.txt): install those "
        "versions, or port core/framework.py to the new ones")


def find_internal(dotted: str) -> object:
    """The object `dotted` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                raise moved_error(dotted)
            found = getattr(found, attribute)
        return found
    raise moved_error(dotted)


def check_internals(names: Iterable[str] = INTERNALS) -> None:
    """Raises `FrameworkMovedError` naming the first of `names` that no longer exists."""
    for name in names:
        find_internal(name)


check_internals()

# Safe now: `check_internals` found each of these.
from tensorflow.core.protobuf.trackable_object_graph_pb2 import TrackableObjectGraph  # noqa: E402
from tensorflow.python.checkpoint import checkpoint_management, functional_saver  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)
from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext  # noqa: E402
from tensorflow.python.trackable.constants import (  # noqa: E402
    OBJECT_GRAPH_PROTO_KEY,
    VARIABLE_VALUE_KEY,
)


_OPTIMIZER = "keras.optimizers.Optimizer"


def _instance_internal(instance: object, owner: str, name: str) -> object:
    """`instance.<name>`, a private attribute Keras sets on instances of `owner`."""
    try:
        return getattr(instance, name)
    except AttributeError:
        raise moved_error(f"{owner}.{name}") from None


def compiled_by_xla() -> bool:
    """True while tracing a function that XLA will compile (`jit_compile=True`, TPUs).

    Some layers compute the same values two ways, one of which only pays off
    inside an XLA program (see `network.layers.fast_paths`). TensorFlow
    marks such graphs with an XLA context but has no public way to ask.
    """
    if tf.executing_eagerly():
        return False
    return bool(GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


class OptimizerWithBatchUpdate(keras.optimizers.Optimizer):
    """A Keras optimizer that applies each micro-batch's gradients itself.

    Keras' TensorFlow path clips gradients before the cross-replica
    all-reduce and puts gradient accumulation inside a `cond` (where
    MirroredStrategy allows no cross-replica sync), and it has no public hook
    to change either. This class takes over Keras' private hook and hands
    the gradients to `apply_batch`, which a subclass implements, and gives
    public names to the optimizer state that `apply_batch` needs.
    """

    def apply_batch(self, grads: list, variables: list[tf.Variable]) -> None:
        """Applies one micro-batch's gradients: non-empty, unscaled, still per replica.

        `optimizer.apply` calls it once per micro-batch and afterwards
        increments `micro_batches`.
        """
        raise NotImplementedError

    def _backend_apply_gradients(self, grads, trainable_variables):
        # tf.distribute updates tf.Variables, which Keras variables wrap.
        self.apply_batch(grads, [variable.value if isinstance(variable, keras.Variable)
                                 else variable for variable in trainable_variables])

    def _get_current_learning_rate(self):
        # Keras evaluates a schedule at the micro-batch count, which with
        # accumulation runs N times too fast; here it sees the update count.
        learning_rate = _instance_internal(self, _OPTIMIZER, "_learning_rate")
        if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    @property
    def micro_batches(self) -> keras.Variable:
        """Micro-batches applied so far; the public `iterations` counts updates."""
        return _instance_internal(self, _OPTIMIZER, "_iterations")

    def variable_index(self, variable) -> int:
        """The position of `variable` (or of one replica's copy) in the optimizer's slots."""
        return self._get_variable_index(variable)

    def gradient_accumulator(self, variable) -> keras.Variable:
        """The variable that sums `variable`'s gradients between updates."""
        accumulators = _instance_internal(self, _OPTIMIZER, "_accumulated_gradients")
        return accumulators[self._get_variable_index(variable)]

    def uses_weight_decay(self, variable) -> bool:
        """False for variables excluded by `exclude_from_weight_decay` (by object or name)."""
        return self._use_weight_decay(variable)

    def merge_call(self, fn: Callable, *args) -> object:
        """Calls `fn(strategy, *args)` once across replicas, as Keras' own update does.

        `tf.distribute.ReplicaContext.merge_call` alone would be wrong where a
        strategy runs without merge calls (GPUs under XLA); TensorFlow's
        interim helper picks the right one.
        """
        strategy = _instance_internal(self, _OPTIMIZER, "_distribution_strategy")
        return tf.__internal__.distribute.interim.maybe_merge_call(fn, strategy, *args)


def all_layers(model: keras.Layer) -> list[keras.Layer]:
    """`model` and every layer nested in it, in Keras' own order.

    Keras 3 has no public recursive walk: `Model.layers` lists only direct
    children, and a plain `Layer` has no list of its sublayers at all.
    """
    return model._flatten_layers(include_self=True)


def unwrap_quantize(layer: keras.layers.Layer) -> None:
    """Lets `layer.quantize` be its class's own method, as written.

    Keras wraps the `quantize` of every layer it creates: checks, then the
    layer's state locked for good, which a model that is compiled after
    quantizing (as loading a saved one does) cannot take. A model whose
    `quantize` does its own checks and adds no state of its own drops the
    wrapper; each of its layers keeps its own.
    """
    if "quantize" in vars(layer):
        del layer.quantize


def mark_quantized(layer: keras.layers.Layer, mode: str) -> None:
    """Records that `layer` now holds `mode` weights, as Keras' own layers do in `quantize`.

    The layer's dtype policy becomes `<mode>_from_<policy>`, which routes its
    calls to `quantized_call` and tells a saved config to rebuild it so.
    Keras keeps a private flag beside it, which refuses a second `quantize`
    and keeps the policy's setter from quantizing the layer once more.
    """
    layer._is_quantized = True
    layer.dtype_policy = keras.dtype_policies.get(f"{mode}_from_{layer.dtype_policy.name}")


def seed_generator_states(model: keras.Layer) -> list[keras.Variable]:
    """The state variable of every `keras.random.SeedGenerator` in `model`, each once.

    `Layer.variables` holds them too, but mixed with the weights in another
    order. This order is the one the training checkpoints of earlier runs
    saved them by, so it must not change.
    """
    states = {}
    for layer in all_layers(model):
        for generator in _instance_internal(layer, "keras.layers.Layer", "_seed_generators"):
            states.setdefault(id(generator), generator.state)
    return list(states.values())


# The tensor in which an object-based checkpoint (`tf.train.Checkpoint`) saves
# its object graph; name-based (TF1) checkpoints lack it.
OBJECT_GRAPH_KEY = OBJECT_GRAPH_PROTO_KEY


def saved_children(reader: object, path: Sequence[str]) -> dict[str, str | None]:
    """The objects under `path` in an object-based checkpoint, with their values' keys.

    `reader` is what `tf.train.load_checkpoint` returns. The key of a
    variable's value is the first path the saver reached it by, which need
    not be `path`; only the saved object graph links the two, and
    `tf.train.CheckpointView` walks that graph but hides the keys. Objects
    that saved no value map to None. Raises KeyError naming a missing step.
    """
    graph = TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    node = 0  # the root: the tf.train.Checkpoint
    for step in path:
        children = {child.local_name: child.node_id for child in graph.nodes[node].children}
        if step not in children:
            raise KeyError(step)
        node = children[step]
    return {child.local_name: next((attribute.checkpoint_key for attribute
                                    in graph.nodes[child.node_id].attributes
                                    if attribute.name == VARIABLE_VALUE_KEY), None)
            for child in graph.nodes[node].children}


# The two calls that end a `tf.train.CheckpointManager.save`, as (module, name):
# merging the shards into `ckpt-N.index`, then naming `ckpt-N` in the
# `checkpoint` file. Fault tests stop a save at each to prove a rerun recovers.
CHECKPOINT_SAVE_STEPS = {
    "save": (functional_saver.gen_io_ops, "merge_v2_checkpoints"),
    "index": (checkpoint_management, "update_checkpoint_state_internal"),
}


def frozen_function(function: tf.types.experimental.ConcreteFunction
                    ) -> tf.types.experimental.ConcreteFunction:
    """`function` with every variable it reads turned into a constant of its current value.

    The TFLite converter keeps a Keras 3 model's variables as resource
    variables that nothing initializes in the interpreter (every output
    NaN); frozen first, they become the model's constant tensors. TensorFlow
    offers freezing only under `tensorflow.python`.
    """
    return convert_variables_to_constants_v2(function)
