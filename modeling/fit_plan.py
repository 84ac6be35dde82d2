"""What one `fit` call on a task model will run, decided before any step is taken.

`TextTask.fit` (`modeling.text_tasks`) is a plan and a run: the plan checks
every argument in Python and settles where the examples come from (raw
text fed in an order `fit` draws itself, or data Keras batches), how many
steps an epoch has and what a resumed run must share with the one it
continues; the run then trains, with checkpoints and logs. The checks here
need no model; the task's own (labels, class weights, the texts) are the
model's, between them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from core.arguments import check_integer
from modeling.text_arguments import (check_examples, folder_argument, is_raw_text, kind,
                                     optional_count)
from training.example_order import ExampleOrder


@dataclasses.dataclass
class FitPlan:
    """One `fit` call's arguments, checked, and the run they make.

    The fields up to `kwargs` are `fit`'s arguments (Keras' other ones in
    `kwargs`); `in_order`, `order` and `per_epoch` are what the model makes
    of them (`TextTask._plan_fit`).
    """

    x: Any
    y: Any
    sample_weight: Any
    batch_size: int | None
    epochs: int
    initial_epoch: int
    steps_per_epoch: int | None
    shuffle: Any
    validation_data: Any
    resume_dir: str | None
    save_freq: int
    log_dir: str | None
    log_freq: int
    kwargs: dict
    # Raw text given as Python data: fed in an order `fit` draws (`training.example_order`).
    in_order: bool = False
    validation_split: float | None = None  # taken from `kwargs` for raw text in order
    order: ExampleOrder | None = None
    per_epoch: int | None = None  # steps per epoch; None when a dataset's size is unknown

    @classmethod
    def checked(cls, x, y, batch_size, epochs, sample_weight, validation_data, steps_per_epoch,
                initial_epoch, shuffle, resume_dir, save_freq, log_dir, log_freq,
                kwargs: dict) -> FitPlan:
        """`fit`'s arguments with the counts, frequencies and folders checked, in that order."""
        batch_size = optional_count("batch_size", batch_size)
        epochs = check_integer("epochs", epochs)
        steps_per_epoch = optional_count("steps_per_epoch", steps_per_epoch)
        initial_epoch = check_integer("initial_epoch", initial_epoch, minimum=0)
        save_freq, log_freq = check_integer("save_freq", save_freq), check_integer(
            "log_freq", log_freq)
        resume_dir = folder_argument("resume_dir", resume_dir)
        log_dir = folder_argument("log_dir", log_dir)
        return cls(x, y, sample_weight, batch_size, epochs, initial_epoch, steps_per_epoch,
                   shuffle, validation_data, resume_dir, save_freq, log_dir, log_freq, kwargs)

    def check_inputs(self) -> None:
        """Refuses epochs that train nothing, no examples, and what `resume_dir` and
        `validation_split` cannot work with; sets `in_order` and `validation_split`."""
        if self.initial_epoch >= self.epochs:
            raise ValueError(f"initial_epoch={self.initial_epoch} is not below "
                             f"epochs={self.epochs}: fit would train nothing (epochs is the "
                             "index of the epoch to stop before, counted from 0)")
        check_examples(self.x, "x", "fit needs at least one")
        self.in_order = is_raw_text(self.x) and not isinstance(self.x, tf.data.Dataset)
        if self.resume_dir is not None and not self.in_order:
            raise ValueError(f"resume_dir needs x as raw text in Python lists or arrays, got "
                             f"{kind(self.x)}: fit can restore the place of a killed run only in "
                             "an order it draws itself")
        if self.in_order:
            self.validation_split = self.kwargs.pop("validation_split", None)
        if is_raw_text(self.x) and not self.in_order and self.kwargs.get("validation_split"):
            raise ValueError("validation_split splits texts given as Python lists or arrays, "
                             "not a dataset: pass validation_data=dataset")
        if self.validation_split and self.validation_data is not None:
            raise ValueError("validation_split and validation_data both say what to validate "
                             "on: give one")

    @property
    def total(self) -> int | None:
        """The steps this call trains; None when an epoch's are unknown."""
        return self.per_epoch and self.per_epoch * (self.epochs - self.initial_epoch)

    def resume_stamp(self) -> dict:
        """What of the call a resumed run must share with the run it continues."""
        return {**self.order.stamp(), "epochs": self.epochs, "initial_epoch": self.initial_epoch,
                "steps_per_epoch": self.per_epoch}
