"""`compile`, `fit`, `evaluate` and `predict` on raw text for the fine-tuning models.

A task model that owns its task's `preprocessor` (`modeling.task_preprocessor`)
takes strings wherever Keras takes data, as keras-hub's tasks do: the
preprocessor checks the raw inputs and labels in Python, then a `tf.data`
pipeline batches them and maps the preprocessor over each batch, so
tokenization runs in the input pipeline, beside the training step, and the
model itself keeps computing on packed ids (a SavedModel or a runner feeds
those directly). Packed dicts and datasets of them pass through unchanged.

`compile()` without arguments chooses the paper's fine-tuning recipe: the
original AdamW (decay 0.01, epsilon 1e-6, no bias correction, global-norm
clipping at 1.0), learning rate 5e-5 with linear warm-up over the first 10%
of the steps, then linear decay to 0. The number of steps is known only
when `fit` sees the data, so each `fit` call plans its own schedule there
with the runners' rule (`training.optimization.plan`): a `fit` is one
fine-tuning run, warm-up included.

`fit` trains as the runners do: it stops at a step whose loss or gradients
are not finite, keeping the weights from before it (`training.divergence`);
with `resume_dir` a killed `fit` called again continues to the same weights,
bit for bit (`training.resume`, `training.example_order`); with `log_dir`
it writes the loss and the learning rate for TensorBoard
(`training.training_logs`). `validation_split` holds out the last texts (and
their labels and weights) as Keras holds out the last rows of arrays, before
they are packed, so the schedule is sized by the texts that train.

Every argument is checked in Python before Keras builds a dataset: counts,
rates, empty inputs (`modeling.text_arguments`), and the texts, labels and
sample weights (by the task's preprocessor). An empty input predicts an
empty result; `fit` and `evaluate` refuse it. Texts cut at `sequence_length`
are counted and logged once per call (`text.truncation`).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.arguments import FieldError, check_number
from core.record_schema import ENCODER_INPUTS
from modeling.fit_plan import FitPlan
from modeling.task_preprocessor import TaskPreprocessor
from modeling.text_arguments import (DEFAULT_BATCH_SIZE, check_examples, check_packed,
                                     epoch_steps,
                                     example_count, is_raw_text, optional_count, rows,
                                     split_point)
from modeling.text_prediction import TracedPreprocessor, predict_in_batches, serves_in_batches
from text import truncation
from training.divergence import GuardedSteps
from training.example_order import ExampleOrder, draw_seed, fit_in_order
from training.optimization import optimizer_on, plan
from training.replanning import OptimizerRestart, ReplannableDecay
from training.resume import ResumeFolder, SaveCheckpoints
from training.training_logs import LogScalars

AUTO = "auto"


def refuse_both_weights(sample_weight: Any) -> None:
    """Keras refuses `class_weight` beside `sample_weight` only once it builds the dataset."""
    if sample_weight is not None:
        raise FieldError("{class_weight} and {sample_weight} both weigh the examples: give one")


class TextTask(GuardedSteps, keras.Model):
    """A task model whose `fit`, `evaluate` and `predict` also take raw text.

    The raw text goes through `preprocessor`, the task's `TaskPreprocessor`
    (None: packed inputs only). Subclasses say what the task learns with
    `default_loss()`, `default_metrics()` and `default_weighted_metrics()`,
    and what `predict` answers to no examples with `_empty_outputs(shape)`.
    """

    preprocessor: TaskPreprocessor | None

    def compile(self, optimizer: Any = AUTO, loss: Any = AUTO, metrics: Any = AUTO, *,
                learning_rate: float = 5e-5, warmup_proportion: float = 0.1, **kwargs: Any):
        """Keras `compile`, where "auto" stands for the paper's fine-tuning choice.

        With `optimizer="auto"`, `fit` builds the original AdamW with its
        warm-up and decay over the steps it is about to run.
        """
        learning_rate = check_number("learning_rate", learning_rate, 0.0, above=True)
        warmup_proportion = check_number("warmup_proportion", warmup_proportion, 0.0, 1.0)
        self._plan_schedule = isinstance(optimizer, str) and optimizer == AUTO
        self._recipe = {"learning_rate": learning_rate, "warmup_proportion": warmup_proportion}
        self._restart_optimizer = None  # `fit` sets it once it builds a planned optimizer
        if self._plan_schedule:  # re-planned by `fit`; `evaluate` needs none
            optimizer = self._planned_optimizer(num_train_steps=1, num_warmup_steps=0)
        kwargs.setdefault("weighted_metrics", self.default_weighted_metrics())
        self._compile_args = {"loss": self.default_loss() if loss == AUTO else loss,
                              "metrics": self.default_metrics() if metrics == AUTO else metrics,
                              **kwargs}
        super().compile(optimizer=optimizer, **self._compile_args)
        self._add_step_guard()

    def get_compile_config(self) -> dict | None:
        # A planned schedule is saved as the plan, not as its placeholder or its last
        # run's length, so a reloaded model's next `fit` plans its own again.
        config = super().get_compile_config()
        if config is not None and getattr(self, "_plan_schedule", False):
            config.update(optimizer=AUTO, **self._recipe)
        return config

    def compile_from_config(self, config: dict) -> None:
        # Keras skips a custom `compile` when loading unless this is overridden.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def default_loss(self) -> keras.losses.Loss:
        raise ValueError(f"{type(self).__name__} has no default loss: compile it with "
                         "loss=... (a Keras loss on its outputs)")

    def default_metrics(self) -> list:
        return []

    def default_weighted_metrics(self) -> list:
        return []

    def fit(self, x=None, y=None, batch_size=None, epochs=1, sample_weight=None,
            validation_data=None, steps_per_epoch=None, initial_epoch=0, shuffle=True, *,
            resume_dir=None, save_freq: int = 1000, log_dir=None, log_freq: int = 100,
            **kwargs):
        """Keras `fit`, with the runners' stop on divergence, resume after a kill and logs.

        A step whose loss or gradients are not finite is not applied: `fit`
        stops with `FitDiverged` (a `TrainingDiverged`), the model keeping the
        weights from before it. `compile()`'s schedule spans the steps `fit`
        runs: ceil(N / batch_size) per epoch, the short last batch a step of
        its own (`training.optimization.plan`). Raw text given as Python data is
        fed in an order drawn from a seed (`training.example_order`), afresh
        each epoch unless `shuffle=False`.

        Args (beyond Keras'):
          resume_dir: a folder for checkpoints (raw text from Python only). A
            `fit` killed midway and called again the same way continues from
            its newest checkpoint and ends with the same weights, bit for bit,
            as an uninterrupted one (`training.resume`); a finished one
            returns at once. A run that continues inside an epoch calls
            Keras' `fit` twice, so callbacks see two trainings.
          save_freq: steps between checkpoints in `resume_dir`; each epoch's
            end and the last step are saved too.
          log_dir: a folder for TensorBoard: the loss, the metrics and the
            learning rate every `log_freq` steps under `log_dir/train`, each
            epoch's validation scores under `log_dir/validation`.
          log_freq: steps between those points (the last step is logged too).

        `class_weight` (Keras') is checked first: {class: weight} for the
        classes of a single-label classifier, by index or by label name, each
        weight a finite number >= 0 (`training.class_weights.check_class_weight`).
        """
        plan = FitPlan.checked(x, y, batch_size, epochs, sample_weight, validation_data,
                               steps_per_epoch, initial_epoch, shuffle, resume_dir, save_freq,
                               log_dir, log_freq, kwargs)
        if kwargs.get("class_weight") is not None:
            kwargs["class_weight"] = self._class_weight_checked(kwargs["class_weight"],
                                                                sample_weight)
        plan.check_inputs()
        self._plan_fit(plan)
        return self._run_fit(plan)

    def _plan_fit(self, plan: FitPlan) -> None:
        """Settles where `plan`'s examples come from and how many steps it runs, and plans
        `compile()`'s schedule over them; the texts, labels and weights are checked here."""
        if plan.in_order:
            columns, count = self._text_columns_checked(plan.x, plan.y, plan.sample_weight,
                                                        call="fit", needs_labels=True)
            if plan.validation_split:
                columns, count, plan.validation_data = self._split_off_validation(
                    columns, count, plan.validation_split, plan.batch_size)
            plan.order = ExampleOrder(columns, count, plan.batch_size or DEFAULT_BATCH_SIZE,
                                      bool(plan.shuffle))
            plan.per_epoch = plan.steps_per_epoch or plan.order.batches_per_pass
        else:
            if is_raw_text(plan.x):  # a dataset of raw text, batched by its maker
                plan.x, plan.y, plan.sample_weight, plan.batch_size, plan.shuffle = (
                    self.text_dataset(plan.x, call="fit"), None, None, None, False)
            plan.per_epoch = epoch_steps(plan.x, plan.batch_size, plan.steps_per_epoch,
                                         plan.kwargs.get("validation_split"))
        plan.validation_data = self._validation_dataset(plan.validation_data, plan.batch_size)
        if self._step_guard is None:
            raise ValueError(f"{self.name} is not compiled: call compile() (the paper's "
                             "recipe) or compile(optimizer=..., loss=...) before fit")
        self._plan_steps(plan.per_epoch, plan.epochs - plan.initial_epoch)

    def _run_fit(self, plan: FitPlan) -> keras.callbacks.History:
        """Trains as `plan` says: resumed from `resume_dir`'s newest checkpoint, if any,
        stopped at a non-finite step (raising `FitDiverged`), logged to `log_dir`."""
        guard, kwargs, total = self._step_guard, plan.kwargs, plan.total
        self._build_optimizer()
        resume = None if plan.resume_dir is None else ResumeFolder(
            plan.resume_dir, self, f"fit:{type(self).__name__}",
            {**plan.resume_stamp(), **self._recipe_stamp()})
        seed = draw_seed() if plan.in_order else None
        done, seed = resume.restore(seed) if resume else (0, seed)
        callbacks = [*(kwargs.pop("callbacks", None) or []), guard.start(done)]
        if resume:
            callbacks.append(SaveCheckpoints(resume, guard, plan.save_freq, total))
        if plan.log_dir is not None:
            callbacks.append(LogScalars(plan.log_dir, guard, plan.log_freq, total or math.inf))
        try:
            if plan.in_order:
                history = fit_in_order(super().fit, plan.order, seed, done, plan.per_epoch,
                                       range(plan.initial_epoch, plan.epochs),
                                       self._training_batch,
                                       validation_data=plan.validation_data,
                                       callbacks=callbacks, **kwargs)
            else:
                history = super().fit(
                    plan.x, plan.y, batch_size=plan.batch_size, epochs=plan.epochs,
                    sample_weight=plan.sample_weight, validation_data=plan.validation_data,
                    steps_per_epoch=plan.steps_per_epoch, initial_epoch=plan.initial_epoch,
                    shuffle=plan.shuffle, callbacks=callbacks, **kwargs)
        finally:
            diverged = guard.finish(resume.newest if resume else None)
            if resume:
                resume.release()
        if diverged is not None:
            raise diverged
        return history

    def _build_optimizer(self) -> None:
        """Makes the optimizer's slots now, before the training step is traced.

        Keras makes them inside the first trace when no distribution strategy
        was set, and a `tf.function` that creates variables is traced twice;
        built here, the step is traced once (half of `fit`'s start-up).
        """
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
            if getattr(self, "_plan_schedule", False):
                self._restart_optimizer = OptimizerRestart(self.optimizer)

    def _class_weight_checked(self, class_weight: Any, sample_weight: Any) -> dict[int, float]:
        """`fit`'s `class_weight` as {class index: weight}; a model that has no classes of a
        single-label head to weigh refuses it (`BertClassifier` has them)."""
        refuse_both_weights(sample_weight)
        raise FieldError("{class_weight} weighs the classes of a single-label classifier; "
                         "{0} has none: give sample_weight instead", type(self).__name__)

    def _split_off_validation(self, columns: tuple, count: int, validation_split: float,
                              batch_size: int | None) -> tuple[tuple, int, tf.data.Dataset]:
        """(training columns, their count, the validation dataset): the last examples held
        out as Keras' `validation_split` holds them out of arrays (`split_point`), before
        packing, so the schedule counts the training part alone."""
        at = split_point(count, validation_split)
        train = tf.nest.map_structure(lambda column: column[:at], columns)
        held_out = tf.nest.map_structure(lambda column: column[at:], columns)
        batched = tf.data.Dataset.from_tensor_slices(held_out).ragged_batch(
            batch_size or DEFAULT_BATCH_SIZE)
        return train, at, self.text_dataset(batched)

    def _plan_steps(self, per_epoch: int | None, epochs: int) -> None:
        """With `compile()`'s recipe, the optimizer with its schedule over the steps to run."""
        if not getattr(self, "_plan_schedule", False):
            return
        if not per_epoch:
            raise ValueError("compile() chose the warm-up and decay schedule, whose length "
                             "fit cannot tell from a dataset of unknown size: pass "
                             "steps_per_epoch, or compile with your own optimizer")
        updates, warmup = plan(per_epoch, epochs, self._recipe["warmup_proportion"])
        if self._restart_optimizer is None:  # not built by `fit` yet: a new one
            super().compile(optimizer=self._planned_optimizer(updates, warmup),
                            **self._compile_args)
        else:  # as new, under the training step already traced (`training.replanning`)
            self._planned_schedule.replan(updates, warmup)
            self._restart_optimizer()

    def _planned_optimizer(self, num_train_steps: int, num_warmup_steps: int):
        """`compile()`'s recipe as the original AdamW, over a schedule `fit` re-plans."""
        with self.distribute_strategy.scope():
            self._planned_schedule = ReplannableDecay(self._recipe["learning_rate"],
                                                      num_train_steps, num_warmup_steps)
        return optimizer_on(self._planned_schedule)

    def _recipe_stamp(self) -> dict:
        """What of the optimizer a resumed run must share with the run it continues."""
        if getattr(self, "_plan_schedule", False):
            return {"optimizer": AUTO, **self._recipe}
        return {"optimizer": type(self.optimizer).__name__}

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        batch_size = optional_count("batch_size", batch_size)
        check_examples(x, "x", "evaluate needs at least one")
        if is_raw_text(x):
            x = self.text_dataset(x, y, sample_weight, batch_size, call="evaluate",
                                  needs_labels=True)
            y = sample_weight = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras `predict`; no examples give an empty result of the outputs' shape."""
        batch_size = optional_count("batch_size", batch_size)
        if x is None:
            raise ValueError("x is None: give the examples to predict")
        check_packed(x)
        if example_count(x) == 0:
            return self._empty_outputs(self._input_shape(x))
        if is_raw_text(x) and serves_in_batches(self, x, kwargs):
            columns, count = self._text_columns_checked(x, None, None, "predict")
            return predict_in_batches(self, self._traced_preprocessor().function, columns, count,
                                      batch_size or DEFAULT_BATCH_SIZE,
                                      kwargs.get("verbose", "auto"))
        if is_raw_text(x):
            x, batch_size = self.text_dataset(x, batch_size=batch_size, call="predict"), None
        return super().predict(x, batch_size=batch_size, **kwargs)

    def _traced_preprocessor(self) -> TracedPreprocessor:
        traced = self.__dict__.get("_traced")
        if traced is None or not traced.serves(self.preprocessor):
            traced = TracedPreprocessor(self._preprocess_batch, self.preprocessor)
            self.__dict__["_traced"] = traced  # untracked: not a layer, weight or function
        return traced

    def text_dataset(self, x, y=None, sample_weight=None, batch_size=None,
                     call: str = "predict", argument: str = "x",
                     needs_labels: bool = False) -> tf.data.Dataset:
        """Raw inputs (or a batched dataset of them) as a dataset of model inputs, in order.

        `call` and `argument` name the method and argument in messages and in
        the count of texts cut at `sequence_length`; `needs_labels` refuses
        Python inputs without `y`.
        """
        self._require_preprocessor()
        if isinstance(x, tf.data.Dataset):
            dataset = x
        else:
            columns, _ = self._text_columns_checked(x, y, sample_weight, call, argument,
                                                    needs_labels)
            dataset = tf.data.Dataset.from_tensor_slices(columns).ragged_batch(
                batch_size or DEFAULT_BATCH_SIZE)
        preprocess = (self._training_batch if call == "fit" and argument == "x"
                      else self._preprocess_batch)
        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE
                           ).prefetch(tf.data.AUTOTUNE)

    def _preprocess_batch(self, *batch):
        """A batch of columns as the model reads it: features (with targets, if given)."""
        return self.preprocessor(*batch, training=False)

    def _training_batch(self, *batch):
        """A batch of columns as `fit` trains on it (one row per window, where windowed)."""
        return self.preprocessor(*batch, training=True)

    def _text_columns_checked(self, x, y, sample_weight, call: str, argument: str = "x",
                              needs_labels: bool = False) -> tuple[tuple, int]:
        """(columns, count): Python inputs, labels and weights checked, as tensors.

        The columns are (inputs, labels, weights), without those not given;
        what the window cuts is reported here, once per call.
        """
        self._require_preprocessor()
        where = "" if argument == "x" else f"{argument}: "
        if needs_labels and y is None:
            raise ValueError(f"{where}{call} on raw text needs the labels: give y")
        try:
            columns = self.preprocessor.text_columns(x, y, sample_weight, argument)
        except (TypeError, ValueError) as error:
            if str(error).startswith(where):  # the label checks name the argument
                raise
            raise type(error)(f"{where}{error}") from None
        count = rows(columns[0])
        if count == 0:
            raise ValueError(f"{where}{argument} holds no examples: {call} needs at least one")
        truncation.report(call if argument == "x" else f"{call} {argument}",
                          self.preprocessor.truncation(columns[0]))
        return columns, count

    def _validation_dataset(self, validation_data, batch_size: int | None):
        """`validation_data` as `fit` hands it to Keras: raw text becomes a dataset."""
        if validation_data is None:
            return None
        if isinstance(validation_data, tf.data.Dataset):
            return (self.text_dataset(validation_data, batch_size=batch_size)
                    if is_raw_text(validation_data) else validation_data)
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError("validation_data must be (x, y), (x, y, sample_weight) or a "
                             f"dataset, got {type(validation_data).__name__}"
                             + (f" of {len(validation_data)} items"
                                if isinstance(validation_data, (tuple, list)) else ""))
        check_examples(validation_data[0], "validation_data", "there is nothing to validate on")
        if not is_raw_text(validation_data[0]):
            return validation_data
        return self.text_dataset(*validation_data, batch_size=batch_size, call="fit",
                                 argument="validation_data", needs_labels=True)

    def _require_preprocessor(self) -> None:
        if self.preprocessor is None:
            raise ValueError(f"{self.name} has no preprocessor, so it takes packed inputs "
                             f"({', '.join(ENCODER_INPUTS)}); "
                             "build it with from_pretrained(..., sequence_length=N) to feed text")
        if not isinstance(self.preprocessor, TaskPreprocessor):
            raise ValueError(f"{type(self).__name__} takes packed inputs only, not raw text")

    def _input_shape(self, x) -> tuple:
        """The packed input shape `x` stands for: its own, or [N, sequence_length] for text."""
        if isinstance(x, dict):
            return tuple(np.shape(next(iter(x.values()))))
        self._require_preprocessor()
        return example_count(x), self.preprocessor.sequence_length

    def _empty_outputs(self, input_shape: tuple):
        """`predict`'s result for packed inputs of `input_shape`, which has no rows."""
        raise ValueError(f"x holds no examples: {type(self).__name__} has nothing to predict")
