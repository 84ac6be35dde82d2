"""Every runner's flags, defined once per group, and their conversion into configs.

The runners define the groups they need, then turn the parsed values into
the dataclasses of `training.configs` and `tasks.model_files` with the
`*_from_flags` functions, and `run_task` hands them to a task's contract;
building those configs is the validation, so a bad value is refused with
the same message whether it came from a flag or from Python. A task's own
settings are its dataclass, built by `task_from_flags` from the flags of
its fields' names (the flags are named after the fields). Nothing here
reads absl's global `FLAGS`: each function takes the `FlagValues` to read,
which lets tests check the flags in a fresh `FlagValues`.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from typing import Any, Callable, Iterable, Mapping, Sequence

from absl import flags

from cli import quiet_start
from core import run_folder
from network.config import BertConfig
from tasks import contract
from tasks.contract import Task, TaskResult, TaskSettingsT
from tasks.model_files import ModelFiles
from training.configs import (DistributionConfig, OptimizationConfig, TrainingConfig,
                              check_batch_split, check_weights_to_evaluate)
from training.distribution import PRECISIONS, STRATEGIES, set_precision
from training.loop import is_chief


def define_model_flags(flag_values: flags.FlagValues, lower_case: bool = True) -> None:
    """The pre-trained model's files; `lower_case=False` for runners that never tokenize.

    Every runner defines these, so `--tf_cpp_log` comes with them.
    """
    into = {"flag_values": flag_values}
    flags.DEFINE_string("bert_config_file", None, "Google bert_config.json or HF config.json "
                        "(default: the one in --init_checkpoint's folder).", **into)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the checkpoint (default: "
                        "vocab.txt in --init_checkpoint's folder).", **into)
    flags.DEFINE_string("init_checkpoint", None, "Google, Hugging Face or own checkpoint, or "
                        "its folder (random init when unset).", **into)
    if lower_case:
        flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased models; "
                          "default: as --init_checkpoint's model was trained, else true).",
                          **into)
    flags.DEFINE_bool(quiet_start.FLAG, False, "Show TensorFlow's C++ start-up lines and "
                      "its info logs (hidden unless TF_CPP_MIN_LOG_LEVEL=0).", **into)


def define_training_flags(flag_values: flags.FlagValues, max_seq_length: int,
                          learning_rate: float, train_batch_size: int, log_every: int) -> None:
    """Output, actions, batching, schedule and checkpoint cadence: the same in every runner."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("output_dir", None, "Checkpoints, logs and results go here.", **into)
    flags.DEFINE_bool("do_train", False, "Train.", **into)
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev / evaluation data.", **into)
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Packed sequence length.", **into)
    flags.DEFINE_integer("train_batch_size", train_batch_size,
                         "Global batch size per optimizer update.", **into)
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.", **into)
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.", **into)
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per update; must divide --train_batch_size.", **into)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Updates between checkpoints.", **into)
    flags.DEFINE_integer("log_every", log_every,
                         "Updates between progress lines and TensorBoard points.", **into)
    flags.DEFINE_integer("random_seed", 12345,
                         "Seed for input order, dropout and initialization.", **into)


def define_finetuning_flags(flag_values: flags.FlagValues, max_seq_length: int = 128,
                            learning_rate: float = 5e-5, num_train_epochs: float = 3.0,
                            train_batch_size: int = 32) -> None:
    """The original fine-tuning runners' shared flags, with each runner's own defaults."""
    into = {"flag_values": flag_values}
    define_model_flags(flag_values)
    define_training_flags(flag_values, max_seq_length, learning_rate, train_batch_size,
                          log_every=50)
    flags.DEFINE_bool("do_predict", False, "Predict the test set.", **into)
    flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.", **into)
    flags.DEFINE_float("num_train_epochs", num_train_epochs, "Passes over the training set.",
                       **into)
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with linear warmup.", **into)
    flags.DEFINE_bool("adam_bias_correction", False,
                      "AdamW with Adam's bias correction (as PyTorch's); default: the original "
                      "optimizer, without it.", **into)
    flags.DEFINE_integer("transfer_layers", None,
                         "Transfer the embeddings and only the first N Transformer blocks of "
                         "--init_checkpoint; the blocks above (and the pooler) start random, "
                         "as in GPT's layers-transferred curve. Default: all.", **into)
    flags.DEFINE(RateListParser(), "learning_rates", [],
                 "The paper's sweep: fine-tune at each of these comma-separated rates and keep "
                 "the best on dev (with --do_eval); one row each in sweep_results.tsv. "
                 "Default: --learning_rate alone.", serializer=flags.CsvListSerializer(","),
                 **into)
    flags.DEFINE_integer("num_restarts", 1, "Runs per learning rate, each with its own seed "
                         "(--random_seed + restart): data order and new layers' initialization.",
                         **into)
    define_distribution_flags(flag_values)


class RateListParser(flags.ListParser):
    """A comma-separated list of numbers: `--learning_rates=5e-5,3e-5`."""

    def parse(self, argument: str | list) -> list[float]:
        rates = []
        for rate in super().parse(argument):
            try:
                rates.append(float(rate))
            except (TypeError, ValueError):
                raise ValueError(f"{rate!r} is not a number") from None
        return rates

    def flag_type(self) -> str:
        return "comma separated list of numbers"


def define_variant_flags(flag_values: flags.FlagValues, causal: str, bilstm_units: str,
                         export_saved_model: str) -> None:
    """The model variants every fine-tuning runner offers, each flag's help in the task's terms.

    `--causal` fine-tunes the left-to-right model, `--bilstm_units` adds
    Table 5's randomly initialized BiLSTM, `--export_saved_model` exports the
    trained model for raw text: one name, type and default in every runner.
    """
    into = {"flag_values": flag_values}
    flags.DEFINE_bool("causal", False, causal, **into)
    flags.DEFINE_integer("bilstm_units", 0, bilstm_units, **into)
    flags.DEFINE_bool("export_saved_model", True, export_saved_model, **into)


def define_pretraining_flags(flag_values: flags.FlagValues) -> None:
    """The original `run_pretraining.py`'s flags plus ours."""
    into = {"flag_values": flag_values}
    define_model_flags(flag_values, lower_case=False)
    define_training_flags(flag_values, max_seq_length=128, learning_rate=5e-5,
                          train_batch_size=32, log_every=100)
    flags.DEFINE_string("input_file", None, "TFRecord files: glob or comma-separated globs.",
                        **into)
    flags.DEFINE_string("eval_input_file", None,
                        "Evaluation records (default: --input_file).", **into)
    flags.DEFINE_enum("objective", "mlm_nsp", ["mlm_nsp", "mlm", "ltr"],
                      "Pre-training objective.", **into)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.", **into)
    flags.DEFINE_integer("num_train_steps", 100000, "Optimizer updates.", **into)
    flags.DEFINE_integer("num_warmup_steps", None, "Linear warmup updates (default: 10% of "
                         "--num_train_steps, the original fine-tuning's warmup share).", **into)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "AdamW (the original) or LAMB.",
                      **into)
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.", **into)
    flags.DEFINE_integer("iterations_per_loop", 1,
                         "Steps per tf.function call (steps_per_execution).", **into)
    flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches.", **into)
    define_distribution_flags(flag_values)


def define_distribution_flags(flag_values: flags.FlagValues) -> None:
    """Where training runs and in which precision."""
    into = {"flag_values": flag_values}
    flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES),
                      "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.", **into)
    flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.", **into)
    flags.DEFINE_string("tpu", None, "TPU name, or a gRPC address (grpc://host:port or "
                        "host:port) with --distribution_strategy=tpu; unset on a TPU VM.", **into)
    flags.DEFINE_integer("tpu_timeout_s", 120, "Give up connecting to the TPU after this long.",
                         **into)
    flags.DEFINE_integer("cpu_replicas", 0, "Split the CPU into this many logical devices, so "
                         "`mirrored` can be tried without GPUs (testing and debugging).", **into)
    flags.DEFINE_enum("dtype", "float32", list(PRECISIONS), "Compute precision.", **into)
    flags.DEFINE_bool("jit_compile", None, "Compile the training step with XLA. Unset: "
                      "compiled on one CPU in float32 up to hidden size 768 (measured faster "
                      "there) and on one GPU (as Keras does).", **into)


def check_required(values: flags.FlagValues, names: Iterable[str]) -> None:
    """Refuses a run without the flags it cannot do without, before anything is read.

    The model's files are required by the task's rule, when they are
    resolved (`tasks.model_files`), since `--init_checkpoint`'s folder may
    hold them.
    """
    for name in names:
        if not values[name].value:
            raise ValueError(f"--{name} is required")


def model_files_from_flags(values: flags.FlagValues) -> ModelFiles:
    """The model's files as the flags name them; the casing is None unless a flag gives it.

    Files no flag names are found in `--init_checkpoint`'s folder when the
    task resolves them, after every flag value has been checked.
    """
    lower_case = True  # a runner without the flag never tokenizes
    if "do_lower_case" in values:
        lower_case = values.do_lower_case if values["do_lower_case"].present else None
    transfer = values["transfer_layers"].value if "transfer_layers" in values else None
    return ModelFiles(values.bert_config_file, values.vocab_file, lower_case,
                      values.init_checkpoint, transfer)


def training_config_from_flags(values: flags.FlagValues) -> TrainingConfig:
    """The training settings; flags a runner does not define keep the config's defaults."""
    names = [field.name for field in dataclasses.fields(TrainingConfig)]
    return TrainingConfig(**{name: values[name].value for name in names if name in values})


def optimization_from_flags(values: flags.FlagValues) -> OptimizationConfig:
    """Fine-tuning runners train for epochs; pre-training for `--num_train_steps` updates.

    The epochs are only checked when training, since evaluating a fine-tuned
    model never reads them.
    """
    if "num_train_steps" in values:
        return OptimizationConfig(values.learning_rate, values.optimizer,
                                  values.gradient_accumulation_steps, values.num_train_steps,
                                  values.num_warmup_steps, num_train_epochs=None)
    return OptimizationConfig(values.learning_rate,
                              gradient_accumulation_steps=values.gradient_accumulation_steps,
                              num_train_epochs=values.num_train_epochs if values.do_train
                              else None, warmup_proportion=values.warmup_proportion,
                              adam_bias_correction=values.adam_bias_correction)


def distribution_from_flags(values: flags.FlagValues) -> DistributionConfig:
    return DistributionConfig(values.distribution_strategy, values.num_gpus, values.tpu,
                              values.tpu_timeout_s, values.cpu_replicas)


def training_configs(values: flags.FlagValues, require: Sequence[str] = ("output_dir",)
                     ) -> tuple[ModelFiles, TrainingConfig, OptimizationConfig,
                                DistributionConfig]:
    """Every runner's one validation of the shared flags: refuses, or returns the configs."""
    model_files = model_files_from_flags(values)
    check_required(values, require)
    actions = [name for name in ("do_train", "do_eval", "do_predict") if name in values]
    if not any(values[name].value for name in actions):
        named = [f"--{name}" for name in actions]
        listed = ", ".join(named) if len(named) > 2 else " and ".join(named)
        raise ValueError(f"at least one of {listed} must be set")
    training = training_config_from_flags(values)
    if training.output_dir and "://" not in training.output_dir:
        # "a/../b" is b: creating it must not leave an "a" behind.
        training = dataclasses.replace(training, output_dir=os.path.normpath(training.output_dir))
    optimization = optimization_from_flags(values)
    distribution = distribution_from_flags(values)
    check_batch_split(training, optimization)
    scoring = [name for name in ("do_eval", "do_predict")
               if name in values and values[name].value]
    if scoring:  # pre-training (counted in steps) also evaluates the checkpoint it resumes
        check_weights_to_evaluate(scoring, values.do_train, values.init_checkpoint,
                                  training.output_dir if "num_train_steps" in values else None)
    return model_files, training, optimization, distribution


def task_from_flags(values: flags.FlagValues, settings: type[TaskSettingsT],
                    **derived: Any) -> TaskSettingsT:
    """A task's settings dataclass from the flags named after its fields, which it checks.

    A field no flag sets keeps its default, unless `derived` gives its value
    (a rule of the runner's, such as the feature-based tagger's own default
    rate); a list flag becomes a tuple.
    """
    fields = {}
    for field in dataclasses.fields(settings):
        if field.name in derived:
            fields[field.name] = derived[field.name]
        elif field.name in values:
            value = values[field.name].value
            fields[field.name] = tuple(value) if isinstance(value, list) else value
    return settings(**fields)


def run_task(values: flags.FlagValues, family: Task[TaskSettingsT],
             settings: type[TaskSettingsT], owner: Callable[[TaskSettingsT], str],
             require: Sequence[str] = ("output_dir",),
             stamp: Callable[[TaskSettingsT], Mapping[str, Any]] | None = None,
             **derived: Any) -> TaskResult:
    """Every training runner's one path: its flags as configs and task, then the contract.

    The shared flags are checked first, then the task's (`task_from_flags`
    with `derived`). Between `prepare` and `run`, the output folder is
    checked and claimed for `owner(task)` (e.g. `classification:sst-2`), the
    model's config and `stamp(task)` (settings a resumed run must share, such
    as class weights), and the strategy made.
    """
    model_files, training, optimization, _ = training_configs(values, require)
    task = task_from_flags(values, settings, **derived)
    with run_folder.removed_unless_used(training.output_dir):  # a refusal leaves no folder
        return contract.run_task(family, task, model_files, training, optimization,
                                 start=lambda resolved: start_run(
                                     values, training, owner(task), resolved.config,
                                     stamp(task) if stamp else None))


def run_extraction(values: flags.FlagValues, family: Task[TaskSettingsT],
                   settings: type[TaskSettingsT]) -> TaskResult:
    """A task that trains nothing and writes one file (`extract_features.py`): the same
    `prepare` and `run`, without training settings, a strategy or a folder to claim; the
    file is written whole or not at all, so a second run can only replace it whole."""
    task = task_from_flags(values, settings)
    return contract.run_task(family, task, model_files_from_flags(values), None, None)


def start_run(values: flags.FlagValues, training: TrainingConfig, owner: str,
              config: BertConfig, settings: Mapping[str, Any] | None = None):
    """Checks and claims the output folder, then returns the strategy the flags ask for.

    The strategy comes before any other TensorFlow work: multi-worker
    collectives must be set up before any op runs. The chief (the one
    writer) then claims the folder for `owner`, the model `config` and the
    task's `settings` (`core.run_folder`): a second live run, or a run of
    another task, model or settings, is refused before any work.
    """
    check_output_dir(training.output_dir)
    strategy = strategy_from_flags(values)
    if "://" not in training.output_dir and is_chief(strategy):
        run_folder.claim(training.output_dir, owner, {**config.to_dict(), **(settings or {})})
    return strategy


def strategy_from_flags(values: flags.FlagValues):
    """The strategy and precision policy the flags ask for; call before any other TF work."""
    strategy = distribution_from_flags(values).strategy()
    set_precision(values.dtype)
    return strategy


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
