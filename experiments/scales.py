"""Scale presets and the real data a grid reads.

Every pre-training in a grid has the same compute budget (steps x batch x
sequence length) and every fine-tuning the same recipe, so the rows of a
table differ only in what the paper's row changes; a scale fixes those
budgets, the model sizes and the learning rates.

Downstream tasks, real and small (see the README's data table):
- sentiment: Rotten Tomatoes snippets in the SST-2 layout (`run_classifier.py
  --task_name=sst-2`), the paper's SST-2 stand-in; the score is dev accuracy
  at the learning rate with the best mean over the restarts;
- tagging: WSJ part-of-speech tags in CoNLL layout (`run_ner.py`), the
  stand-in for CoNLL-2003 NER; the learning rate is chosen on validation F1
  and the test F1 of its seeds is reported;
- any GLUE folders given with `--glue_dir`, scored like sentiment;
- SQuAD v1.1 with `--squad_dir` (`run_squad.py`), dev F1 at the best rate.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping, Sequence

from core.atomic import write_atomically
from data_prep.corpora.builtin_corpus import news_sample_path, wikipedia_sample_path
from data_prep.corpora.oanc import oanc_sample_path
from data_prep.corpora.rotten_tomatoes import pretraining_corpus_path, sst2_layout_dir
from data_prep.corpora.wsj_pos import wsj_conll_dir
from experiments.jobs import Dataset

GLUE_TASKS = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI")


@dataclasses.dataclass(frozen=True)
class Phase:
    """One pre-training phase: the records it reads and how long and fast it trains."""
    max_seq_length: int
    max_predictions_per_seq: int
    dupe_factor: int
    steps: int
    warmup: int
    batch: int
    learning_rate: float


@dataclasses.dataclass(frozen=True)
class Scale:
    """Sizes and budgets of one preset; `tasks` picks the downstream columns.

    `figure_steps` are checkpoints of the first phase, the one that holds
    nearly all of the updates; the figure fine-tunes them at that phase's length.
    """
    name: str
    vocab_size: int
    phases: tuple[Phase, ...]
    base_model: tuple[int, int]  # (layers, hidden) of Tables 5, 8 and the figure
    table6_models: tuple[tuple[int, int], ...]
    figure_steps: tuple[int, ...]
    learning_rates: tuple[float, ...]
    classifier: Mapping[str, object]
    tagger: Mapping[str, object]
    feature_tagger: Mapping[str, object]
    sentiment_train_examples: int | None
    max_eval_steps: int = 50
    jit_compile: bool = True
    data_seed: int = 12345  # phase n's records (from 0) are drawn with data_seed + n
    # Table 7 reads the last four blocks, so it needs a model of at least four.
    feature_model: tuple[int, int] | None = None  # None: the base model
    tasks: tuple[str, ...] = ("sentiment", "tagging")
    squad: Mapping[str, object] = dataclasses.field(default_factory=lambda: {
        "max_seq_length": 128, "doc_stride": 64, "max_query_length": 32,
        "train_batch_size": 16, "predict_batch_size": 64, "num_train_epochs": 2})


def _phases(*rows: tuple) -> tuple[Phase, ...]:
    """Phases from rows in the field order of `Phase` (length, masked, dupe, steps, ...)."""
    return tuple(Phase(*row) for row in rows)


SCALES = {
    # Each table within a few hours on a 2-core CPU (estimates in the README).
    # The demo's model (L2/H128) and first phase, whose pre-training measurably transfers.
    "cpu": Scale(
        name="cpu", vocab_size=8000,
        phases=_phases((32, 5, 10, 4500, 450, 128, 1e-3), (64, 10, 2, 400, 40, 64, 5e-4)),
        # Table 6 grows width, then depth; its two larger sizes are Tables 5's and 7's models.
        base_model=(2, 128), table6_models=((2, 64), (2, 128), (4, 128)),
        figure_steps=(1000, 2000, 3000, 4500),
        learning_rates=(3e-4, 1e-3),
        classifier={"max_seq_length": 64, "train_batch_size": 32, "eval_batch_size": 128,
                    "num_train_epochs": 3},
        tagger={"max_seq_length": 64, "train_batch_size": 16, "eval_batch_size": 64,
                "predict_batch_size": 64, "num_train_epochs": 3},
        feature_tagger={"learning_rate": 1e-3, "lstm_units": 128, "num_train_epochs": 3},
        sentiment_train_examples=1500, feature_model=(4, 128)),
    # One GPU: BERT-Mini as the base, ten times the updates.
    "gpu": Scale(
        name="gpu", vocab_size=16000,
        phases=_phases((64, 10, 10, 18000, 1800, 256, 1e-3), (128, 20, 2, 2000, 200, 128, 5e-4)),
        base_model=(4, 256), table6_models=((2, 128), (4, 256), (4, 512), (8, 512)),
        figure_steps=(1000, 2500, 5000, 10000, 18000),
        learning_rates=(5e-5, 1e-4, 3e-4),
        classifier={"max_seq_length": 128, "train_batch_size": 32, "eval_batch_size": 256,
                    "num_train_epochs": 3},
        tagger={"max_seq_length": 128, "train_batch_size": 16, "eval_batch_size": 128,
                "predict_batch_size": 128, "num_train_epochs": 3},
        feature_tagger={"learning_rate": 1e-3, "lstm_units": 384, "num_train_epochs": 4},
        sentiment_train_examples=None, max_eval_steps=200),
}


@dataclasses.dataclass(frozen=True)
class Datasets:
    """The real data a grid reads; `glue` maps a `run_classifier.py` task name to its folder."""
    corpus: Dataset
    sentiment: Dataset | None = None
    tagging: Dataset | None = None
    glue: tuple[tuple[str, Dataset], ...] = ()
    squad: tuple[Dataset, Dataset] | None = None  # training and dev files


def pretraining_corpus_files() -> list[Path]:
    """The demo's pre-training text: Wikipedia, news, OANC and the fair Rotten Tomatoes text."""
    return [wikipedia_sample_path(), news_sample_path(), oanc_sample_path(),
            pretraining_corpus_path()]


def default_datasets(scale: Scale, work_dir: Path, glue_dir: str | None = None,
                     glue_tasks: Sequence[str] = (), squad_dir: str | None = None,
                     glue_train_examples: int | None = None) -> Datasets:
    """The built-in corpora and tasks (fetched into the cache on first use), plus GLUE folders.

    With `glue_train_examples`, a GLUE task with more training examples is
    fine-tuned on its first that many (a copy in `work_dir`), dev kept whole.
    """
    # The user's folders are checked before anything is fetched.
    glue, squad = glue_datasets(glue_dir, glue_tasks), squad_datasets(squad_dir)
    if glue_train_examples is not None:
        glue = tuple((task, Dataset(data.name, (sentiment_subset(
            data.paths[0], work_dir / "datasets", glue_train_examples, task),)))
            for task, data in glue)
    corpus = Dataset("corpus", tuple(pretraining_corpus_files()))
    sentiment = tagging = None
    if "sentiment" in scale.tasks:
        sentiment = Dataset("sentiment", (sentiment_subset(
            sst2_layout_dir(), work_dir / "datasets", scale.sentiment_train_examples),))
    if "tagging" in scale.tasks:
        tagging = Dataset("tagging", (wsj_conll_dir(),))
    return Datasets(corpus, sentiment, tagging, glue, squad)


def sentiment_subset(source: Path, folder: Path, train_examples: int | None,
                     name: str = "sentiment") -> Path:
    """The first `train_examples` training lines of a GLUE-layout folder (header kept) and
    all of its dev set; `source` itself when it holds no more than that.

    The test file is left out: it has no labels, and the grid never predicts it.
    """
    if train_examples is None:
        target = folder / f"{name}_all"
    else:
        target = folder / f"{name}_{train_examples}"
    if (target / "dev.tsv").is_file():
        return target

    lines = (source / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    if train_examples is not None and len(lines) <= train_examples + 1:
        return source
    kept = lines if train_examples is None else lines[:train_examples + 1]
    write_atomically(target / "train.tsv", "".join(kept))
    # dev.tsv last: its presence marks a complete folder.
    write_atomically(target / "dev.tsv", (source / "dev.tsv").read_text(encoding="utf-8"))
    return target


def glue_datasets(glue_dir: str | None, tasks: Sequence[str]) -> tuple[tuple[str, Dataset], ...]:
    """(task, folder) for each GLUE task asked for (default: every task folder found)."""
    if not glue_dir:
        if tasks:
            raise ValueError("--glue_tasks needs --glue_dir")
        return ()
    root = Path(glue_dir)
    if not root.is_dir():
        raise OSError(f"--glue_dir={glue_dir}: no such folder; pass the folder holding the "
                      "GLUE task folders (MRPC/, SST-2/, ...)")
    found = {name.lower(): name for name in os.listdir(root) if (root / name).is_dir()}
    wanted = list(tasks) or [task for task in GLUE_TASKS if task.lower() in found]
    chosen = []
    for task in wanted:
        if task.lower() not in found:
            raise OSError(f"--glue_dir={glue_dir} has no {task}/ folder; pass a folder in "
                          "GLUE's layout or drop the task from --glue_tasks")
        chosen.append((task, Dataset(f"glue-{task}", (root / found[task.lower()],))))
    if not chosen:
        raise OSError(f"--glue_dir={glue_dir} holds none of the GLUE task folders "
                      f"({', '.join(GLUE_TASKS)})")
    return tuple(chosen)


SQUAD_FILES = ("train-v1.1.json", "dev-v1.1.json")


def squad_datasets(squad_dir: str | None) -> tuple[Dataset, Dataset] | None:
    """SQuAD v1.1's training and dev files, by their distributed names, from `squad_dir`."""
    if not squad_dir:
        return None
    paths = [Path(squad_dir) / name for name in SQUAD_FILES]
    for path in paths:
        if not path.is_file():
            raise OSError(f"--squad_dir={squad_dir} has no {path.name}; pass the folder holding "
                          f"SQuAD v1.1's {' and '.join(SQUAD_FILES)}")
    return Dataset("squad-train", (paths[0],)), Dataset("squad-dev", (paths[1],))


def model_shape(layers: int, hidden: int) -> dict:
    """A BERT config of the small family: A = H/64 heads (at least 2), 4H feed-forward."""
    return {"hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": max(2, hidden // 64), "intermediate_size": 4 * hidden,
            "max_position_embeddings": 512, "hidden_act": "gelu"}
