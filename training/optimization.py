"""The original BERT optimizer (AdamW without bias correction), LAMB, and their schedule.

Why not `keras.optimizers.AdamW` / `keras.optimizers.Lamb`:

- Keras' AdamW applies Adam's bias correction; the original does not. Without
  it the first step is about 3.16 lr (m / sqrt(v) = 0.1 / sqrt(0.001) per
  unit of gradient) instead of 1 lr; the warmup tames that, and the paper's
  runs were tuned with it.
- Keras' Lamb applies weight decay outside the trust ratio and adapts every
  variable; the LAMB paper puts the decay term inside the ratio's
  denominator, and BERT implementations exclude LayerNorm weights and biases
  from both decay and layer adaptation.
- Keras clips gradients before the cross-replica all-reduce (each replica
  clips its partial gradient). The global norm that the original clips at
  1.0 is that of the whole batch's gradient, so clipping here happens after
  the reduction; one device and N replicas then take the same step.
- Keras' `gradient_accumulation_steps` fails under MirroredStrategy (its
  update sits in a `cond`, and a cross-replica sync inside a `cond` is not
  allowed), and feeds a schedule the micro-batch count. Here every
  micro-step all-reduces and writes unconditionally, masking the update on
  steps that only accumulate, and the schedule sees the number of updates.

Decay is excluded "by role": every variable of rank <= 1 (biases, LayerNorm
gamma/beta) keeps its value; in BERT these are exactly the variables the
original excluded by the names "LayerNorm", "layer_norm" and "bias".
`exclude_from_weight_decay(var_names=...)` excludes more by name.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops

from core.arguments import check_number
from core.framework import OptimizerWithBatchUpdate
from network.layers import fast_paths

OPTIMIZER_TYPES = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original schedule: linear warmup, then linear decay counted from step 0.

    For step < num_warmup_steps: init_lr * step / num_warmup_steps.
    Afterwards: (init_lr - end_lr) * (1 - min(step, T) / T) + end_lr with
    T = num_train_steps. As in the original, the decay is measured from step
    0, not from the end of warmup, so the rate just after warmup is
    init_lr * (1 - num_warmup_steps / T), not init_lr.
    """

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 end_lr: float = 0.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"num_warmup_steps must be in [0, num_train_steps={num_train_steps}]"
                             f", got {num_warmup_steps}")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_lr = float(end_lr)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        done = ops.minimum(step, float(self.num_train_steps)) / self.num_train_steps
        decayed = (self.init_lr - self.end_lr) * (1.0 - done) + self.end_lr
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / self.num_warmup_steps
        return ops.where(step < self.num_warmup_steps, warmup, decayed)

    def get_config(self) -> dict:
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "end_lr": self.end_lr}


class _DecoupledAdamBase(OptimizerWithBatchUpdate):
    """Moments, decay choice, clipping after all-reduce and accumulation for both optimizers.

    Both share the moment updates m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2;
    subclasses give `_step`, the amount to subtract from the variable.
    """

    def __init__(self, learning_rate=1e-4, weight_decay_rate: float = 0.01,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                 name: str | None = None, **kwargs):
        # Decay is part of `_step` (LAMB needs it inside the trust ratio), and
        # the apply path below implements global-norm clipping only.
        for unsupported in ("weight_decay", "clipnorm", "clipvalue", "use_ema"):
            if kwargs.get(unsupported):
                raise ValueError(f"{type(self).__name__} does not support {unsupported}; "
                                 "use weight_decay_rate and global_clipnorm")
            kwargs.pop(unsupported, None)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])

    def decays(self, variable) -> bool:
        """Whether `variable` gets weight decay (and, for LAMB, layer adaptation)."""
        return len(variable.shape) >= 2 and self.uses_weight_decay(variable)

    def _step(self, value, m, v, learning_rate, decays: bool, step):
        """The amount to subtract from a variable holding `value`, given its updated moments.

        `decays` says whether the variable gets weight decay; `step` is the
        1-based number of this update, in the variable's dtype.
        """
        raise NotImplementedError

    def _new_values(self, decays: bool, gradient, value, m, v, learning_rate, step, apply,
                    clip_scale):
        """The variable's and its moments' next values, as one function of the old ones.

        Compiled with XLA (`_fused_update`), this is one pass over the
        variable's memory instead of a dozen element-wise kernels each reading
        and writing the whole tensor, which made the update of the
        [vocab, hidden] embedding table a large share of a step.
        """
        if clip_scale is not None:
            gradient = gradient * ops.cast(clip_scale, gradient.dtype)
        gradient = ops.cast(gradient, value.dtype)
        new_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        new_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
        delta = self._step(value, new_m, new_v, ops.cast(learning_rate, value.dtype), decays,
                           step)
        if apply is not None:
            new_m, new_v = ops.where(apply, new_m, m), ops.where(apply, new_v, v)
            delta = ops.where(apply, delta, 0.0)
        return new_m, new_v, value - delta

    def update_step(self, gradient, variable, learning_rate, apply=None, clip_scale=None):
        """One update of `variable`; where `apply` is False, nothing changes.

        `clip_scale` multiplies the gradient first (global-norm clipping).
        """
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        index = self.variable_index(variable)
        m, v = self._m[index], self._v[index]
        step = ops.cast(self.iterations + 1, variable.dtype)
        new_m, new_v, new_value = _fused_update(
            self, self.decays(variable), gradient, *map(tf.convert_to_tensor, (
                variable, m, v, learning_rate)), step, apply, clip_scale)
        self.assign(m, new_m)
        self.assign(v, new_v)
        self.assign(variable, new_value)

    def apply_batch(self, grads, variables):
        """All-reduce, accumulate, clip by the global norm of the batch's gradient, update.

        Unlike the TensorFlow backend's path, clipping follows the all-reduce
        and no update sits inside a `cond`. In a single-replica context the
        all-reduce is the identity.
        """
        replica = tf.distribute.get_replica_context()
        if replica:
            grads = replica.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
        steps = self.gradient_accumulation_steps
        accumulators, totals, apply = [], [], None
        if steps:
            accumulators = [self.gradient_accumulator(v).value for v in variables]
            totals = [acc + g for acc, g in zip(accumulators, grads)]
            grads = [total / steps for total in totals]
            apply = ops.equal((self.micro_batches + 1) % steps, 0)
        clip_scale = _clip_scale(grads, self.global_clipnorm) if self.global_clipnorm else None
        self.merge_call(self._distributed_apply, grads, variables, accumulators, totals, apply,
                        self.learning_rate, clip_scale)

    def _distributed_apply(self, distribution, grads, variables, accumulators, totals, apply,
                           learning_rate, clip_scale):
        for grad, variable in zip(grads, variables):
            distribution.extended.update(
                variable, lambda var, grad, lr, apply, scale: self.update_step(
                    grad, var, lr, apply, scale),
                args=(grad, learning_rate, apply, clip_scale), group=False)
        for accumulator, total in zip(accumulators, totals):
            distribution.extended.update(
                accumulator, lambda acc, total, apply: acc.assign(
                    ops.where(apply, ops.zeros_like(total), total)),
                args=(total, apply), group=False)

    def get_config(self) -> dict:
        config = super().get_config()
        for unsupported in ("weight_decay", "clipnorm", "clipvalue", "use_ema"):
            config.pop(unsupported, None)
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="bert")
class BertAdamW(_DecoupledAdamBase):
    """Adam with decoupled weight decay and, as in the original, no bias correction.

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    update = m / (sqrt(v) + eps) + wd * param   (wd only where `decays`);
    param -= lr * update.

    `bias_correction=True` uses Adam's m_hat = m / (1 - b1^t) and
    v_hat = v / (1 - b2^t) in place of m and v (as PyTorch's AdamW does).
    Few-sample fine-tuning without it sometimes ends far below its siblings
    (Zhang et al., 2021; Mosbach et al., 2021): the early steps are about
    3 times larger than Adam's.
    """

    def __init__(self, *args, bias_correction: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.bias_correction = bool(bias_correction)

    def _step(self, value, m, v, learning_rate, decays, step):
        if self.bias_correction:
            m, v = _bias_corrected(m, v, self.beta_1, self.beta_2, step)
        update = m / (ops.sqrt(v) + self.epsilon)
        if decays:
            update = update + self.weight_decay_rate * value
        return learning_rate * update

    def get_config(self) -> dict:
        return {**super().get_config(), "bias_correction": self.bias_correction}


@keras.saving.register_keras_serializable(package="bert")
class Lamb(_DecoupledAdamBase):
    """LAMB (You et al., 2020, Algorithm 2) for large-batch pre-training.

    Bias-corrected Adam direction r = m_hat / (sqrt(v_hat) + eps), plus wd *
    param; the step is scaled per variable by ||param|| / ||r + wd * param||
    (1 where either norm is 0). Variables that do not decay (biases,
    LayerNorm) are not layer-adapted either, as in the paper's BERT runs.
    """

    def _step(self, value, m, v, learning_rate, decays, step):
        m_hat, v_hat = _bias_corrected(m, v, self.beta_1, self.beta_2, step)
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if not decays:
            return learning_rate * update
        update = update + self.weight_decay_rate * value
        weight_norm = ops.sqrt(ops.sum(ops.square(value)))
        update_norm = ops.sqrt(ops.sum(ops.square(update)))
        usable = ops.logical_and(weight_norm > 0, update_norm > 0)
        ratio = ops.where(usable, weight_norm / ops.where(usable, update_norm, 1.0), 1.0)
        return learning_rate * ratio * update


def _clip_scale(grads, clip_norm: float):
    """The factor `tf.clip_by_global_norm` multiplies every gradient by, computed once.

    Applying it inside the fused update spares a pass over every gradient;
    a non-finite norm gives a NaN factor, as there.
    """
    norm = tf.linalg.global_norm(grads)
    return clip_norm * ops.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)


# One XLA kernel per variable and step (see `_new_values`), a fast path; the
# optimizer and whether the variable decays are static, so each (optimizer,
# shape, decay) compiles once.
@fast_paths.xla_compiled
def _fused_update(optimizer: _DecoupledAdamBase, decays: bool, *tensors):
    return optimizer._new_values(decays, *tensors)


def _bias_corrected(m, v, beta_1: float, beta_2: float, step):
    """Adam's (m_hat, v_hat): the moments divided by 1 - beta^step."""
    return m / _one_minus_power(beta_1, step), v / _one_minus_power(beta_2, step)


def _one_minus_power(beta: float, step):
    """1 - beta^step without float32's cancellation.

    float32(0.999) is 1.3e-5 away from 0.999 relative to 1 - 0.999, so
    1 - beta^step computed in float32 biases LAMB's first steps by that much;
    -expm1(step * log(beta)), with the log taken in float64, does not.
    """
    return -ops.expm1(step * math.log(beta))


def plan(batches_per_epoch: float, epochs: float, warmup_proportion: float) -> tuple[int, int]:
    """(updates, warm-up updates) of a run: the schedule's length, counted once for every trainer.

    The rule: updates = floor(batches_per_epoch x epochs), at least 1;
    warm-up = floor(updates x warmup_proportion). The schedule must end on
    the last update the run makes (the rate reaches 0 there, and not before),
    so `batches_per_epoch` counts the batches the trainer actually runs,
    which depends on how it cuts a pass over N examples into batches of B:

    - the runners read one repeated, shuffled stream cut into whole batches
      (a pass's remainder starts the next pass, a final remainder is
      dropped): N / B, a fraction (`OptimizationConfig.schedule`);
    - Keras' `fit` batches each epoch apart and runs its short last batch as
      a step of its own: ceil(N / B) (the task models' `fit`).

    A run of a fixed number of updates is one epoch of that many batches.

    Args:
      batches_per_epoch: batches (optimizer updates) per pass over the data, > 0.
      epochs: passes over the data, > 0 (fractions allowed).
      warmup_proportion: the share of the updates that warm up, in [0, 1].
    """
    batches_per_epoch = check_number("batches_per_epoch", batches_per_epoch, 0.0, above=True)
    epochs = check_number("epochs", epochs, 0.0, above=True)
    warmup_proportion = check_number("warmup_proportion", warmup_proportion, 0.0, 1.0)
    updates = max(1, int(batches_per_epoch * epochs))
    return updates, int(updates * warmup_proportion)


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer_type: str = "adamw", weight_decay_rate: float = 0.01,
                     clip_norm: float | None = 1.0, gradient_accumulation_steps: int = 1,
                     end_lr: float = 0.0, adam_bias_correction: bool = False
                     ) -> _DecoupledAdamBase:
    """The optimizer for pre-training or fine-tuning, with the original's defaults.

    `num_train_steps` and `num_warmup_steps` count optimizer updates; with
    `gradient_accumulation_steps=N` a run makes N times as many `fit` steps
    (micro-batches), and each update averages N micro-batch gradients.
    `clip_norm=None` or 0 turns clipping off. `adam_bias_correction` applies
    to AdamW only (LAMB always corrects).
    """
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps, end_lr)
    return optimizer_on(schedule, optimizer_type, weight_decay_rate, clip_norm,
                        gradient_accumulation_steps, adam_bias_correction)


def optimizer_on(schedule: keras.optimizers.schedules.LearningRateSchedule,
                 optimizer_type: str = "adamw", weight_decay_rate: float = 0.01,
                 clip_norm: float | None = 1.0, gradient_accumulation_steps: int = 1,
                 adam_bias_correction: bool = False) -> _DecoupledAdamBase:
    """`create_optimizer`'s optimizer on a schedule of the caller's making."""
    if optimizer_type not in OPTIMIZER_TYPES:
        raise ValueError(f"unknown optimizer_type {optimizer_type!r}; expected one of "
                         f"{', '.join(OPTIMIZER_TYPES)}")
    if isinstance(gradient_accumulation_steps, bool) or \
            not isinstance(gradient_accumulation_steps, int) or gradient_accumulation_steps < 1:
        raise ValueError("gradient_accumulation_steps must be an integer >= 1, got "
                         f"{gradient_accumulation_steps!r}")
    extra = {"bias_correction": adam_bias_correction} if optimizer_type == "adamw" else {}
    optimizer_class = BertAdamW if optimizer_type == "adamw" else Lamb
    return optimizer_class(
        learning_rate=schedule, weight_decay_rate=weight_decay_rate, **extra,
        global_clipnorm=clip_norm or None,
        gradient_accumulation_steps=gradient_accumulation_steps if gradient_accumulation_steps > 1
        else None)
