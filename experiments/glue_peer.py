"""Hugging Face PyTorch fine-tuning of a GLUE task, with `run_classifier.py`'s flags and files.

The reference beside which the paper-tasks table (`experiments.paper_tasks`)
puts our runner. Only the fine-tuning is PyTorch's
(`experiments/peers/hf_glue_finetune.py`, run in the torch environment,
default `.venv-ref/bin/python`): the examples are read here by the project's
reader, the dev outputs scored by the project's metrics, and the sweep's
choice, its degenerate-run warnings, `sweep_results.tsv`, `eval_results.txt`
and the GLUE submission files written as `run_classifier.py` writes them, so
that the two sides differ only in the implementation they measure.

Each (rate, restart) is one PyTorch process with seed `--random_seed +
restart`; its answer is kept in `runs/lr<rate>_restart<k>/answer.json`, so a
killed sweep started again skips the runs already done.

    python -m experiments.glue_peer --task_name=MRPC --data_dir=glue/MRPC \\
      --init_checkpoint=MODEL_DIR --output_dir=OUT --learning_rates=2e-5 \\
      --num_restarts=3 --do_predict
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from absl import flags, logging

from cli.runner_flags import RateListParser
from core import program
from data_prep.datasets import glue
from evaluation import glue as glue_metrics
from evaluation.degenerate_runs import majority_accuracy
from evaluation.results import write_eval_results
from tasks.driver import SweepRun, flag_degenerate_runs, majority_scores, write_sweep_table

FLAGS = flags.FLAGS
REPOSITORY = Path(__file__).resolve().parents[1]
PEER = REPOSITORY / "experiments" / "peers" / "hf_glue_finetune.py"
TORCH_PYTHON = str(REPOSITORY / ".venv-ref" / "bin" / "python")
REQUIRED = ("task_name", "data_dir", "init_checkpoint", "output_dir")


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """`run_classifier.py`'s flags for what both fine-tunings share, and the torch interpreter."""
    into = {"flag_values": flag_values}
    flags.DEFINE_string("task_name", None, "GLUE task (CoLA, SST-2, MRPC, STS-B, RTE, WNLI...).",
                        **into)
    flags.DEFINE_string("data_dir", None, "The task's files in the GLUE download's layout.",
                        **into)
    flags.DEFINE_string("init_checkpoint", None, "Hugging Face BERT folder to fine-tune.", **into)
    flags.DEFINE_string("output_dir", None, "Runs, sweep_results.tsv, eval_results.txt, "
                        "submission/.", **into)
    flags.DEFINE(RateListParser(), "learning_rates", [5e-5], "Rates of the sweep.",
                 serializer=flags.CsvListSerializer(","), **into)
    flags.DEFINE_integer("num_restarts", 1, "Runs per rate, seeds --random_seed + restart.",
                         **into)
    flags.DEFINE_integer("random_seed", 12345, "Seed of restart 0.", **into)
    flags.DEFINE_bool("adam_bias_correction", False, "PyTorch's AdamW; default: the original "
                      "optimizer, without bias correction.", **into)
    flags.DEFINE_integer("max_seq_length", 128, "Packed sequence length.", **into)
    flags.DEFINE_integer("train_batch_size", 32, "Examples per update.", **into)
    flags.DEFINE_float("num_train_epochs", 3.0, "Passes over the training set.", **into)
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the updates with linear warmup.",
                       **into)
    flags.DEFINE_bool("do_predict", False, "Write the chosen run's test submission.", **into)
    flags.DEFINE_string("torch_python", TORCH_PYTHON, "The torch environment's interpreter.",
                        **into)


def _texts(examples: list[glue.InputExample]) -> dict:
    pair = examples[0].text_b is not None
    return {"a": [e.text_a for e in examples], "b": [e.text_b for e in examples] if pair else None}


def _label_ids(examples: list[glue.InputExample], labels: list[str] | None) -> list:
    if labels is None:
        return [float(e.label) for e in examples]
    return [labels.index(e.label) for e in examples]


def _run_peer(torch_python: str, request: dict, answer: Path) -> dict:
    """One PyTorch fine-tuning (skipped when its answer exists); its answer."""
    if not answer.is_file():
        answer.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=answer.parent,
                                         delete=False) as writer:
            json.dump(request, writer)
        environment = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE")
        try:
            subprocess.run([torch_python, str(PEER), writer.name, str(answer)], check=True,
                           env=environment)
        except subprocess.CalledProcessError as error:
            raise RuntimeError(f"{PEER.name} exited with status {error.returncode}") from None
        finally:
            os.remove(writer.name)
    return json.loads(answer.read_text(encoding="utf-8"))


def read_task(values: flags.FlagValues) -> tuple[glue.TaskProcessor, list, list, dict]:
    """The processor, train and dev examples, and the test sets asked for."""
    missing = [name for name in REQUIRED if not values[name].value]
    if missing:
        raise ValueError(f"--{missing[0]} is required")
    processor = glue.get_processor(values.task_name)
    train = processor.train_examples(values.data_dir)
    dev = processor.dev_sets(values.data_dir)
    if list(dev) != ["dev"]:
        raise ValueError(f"--task_name={values.task_name}: one dev set expected, got {list(dev)}")
    tests = processor.test_sets(values.data_dir) if values.do_predict else {}
    return processor, train, dev["dev"], tests


def sweep(values: flags.FlagValues, processor: glue.TaskProcessor, train: list, dev: list,
          tests: dict) -> tuple[list[SweepRun], tuple[SweepRun, dict] | None]:
    """Every (rate, restart) as a PyTorch run scored on dev; the runs and the best with its
    answer."""
    labels, dev_ids = processor.labels, _label_ids(dev, processor.labels)
    recipe = {"model_dir": values.init_checkpoint, "labels": labels,
              "max_seq_length": values.max_seq_length, "batch_size": values.train_batch_size,
              "epochs": values.num_train_epochs, "warmup_proportion": values.warmup_proportion,
              "bias_correction": values.adam_bias_correction,
              "train": {**_texts(train), "y": _label_ids(train, labels)},
              "predict": {"dev": _texts(dev),
                          **{stem: _texts(examples) for stem, examples in tests.items()}}}
    runs, best = [], None
    for rate in values.learning_rates:
        for restart in range(values.num_restarts):
            folder = Path(values.output_dir) / "runs" / f"lr{rate:g}_restart{restart}"
            answer = _run_peer(values.torch_python, {**recipe, "learning_rate": rate,
                                                     "seed": values.random_seed + restart},
                               folder / "answer.json")
            if answer.get("diverged"):
                runs.append(SweepRun(rate, restart, math.nan, {}, "diverged"))
                continue
            scores = glue_metrics.evaluation_results(processor.name, answer["outputs"]["dev"],
                                                     dev_ids)
            runs.append(SweepRun(rate, restart, scores["eval_score"], scores, "finished"))
            logging.info("learning rate %g, restart %d: dev score %.4f", rate, restart,
                         scores["eval_score"])
            if best is None or runs[-1].score > best[0].score:
                best = (runs[-1], answer)
    return runs, best


def main(argv: list[str], values: flags.FlagValues = FLAGS) -> None:
    del argv
    processor, train, dev, tests = read_task(values)
    runs, best = sweep(values, processor, train, dev, tests)
    labels = processor.labels
    majorities = ({} if labels is None else
                  {"eval_accuracy": majority_accuracy(_label_ids(dev, labels))})
    flag_degenerate_runs(runs, majorities)
    table = write_sweep_table(values.output_dir, runs, best[0] if best else None)
    if best is None:
        raise ValueError(f"every run diverged; see {table}")
    for stem, examples in tests.items():
        glue.write_submission(os.path.join(values.output_dir, "submission"), stem,
                              np.asarray(best[1]["outputs"][stem]), labels,
                              indices=[e.guid for e in examples])
    write_eval_results(os.path.join(values.output_dir, "eval_results.txt"),
                       {**best[0].scores, **majority_scores(best[0].scores, majorities)})


if __name__ == "__main__":
    program.run_command(define_flags, main, __name__)
