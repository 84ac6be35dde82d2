"""What each table runs: scale presets, the data, and the variants per table.

Every pre-training in a grid has the same compute budget (steps x batch x
sequence length) and every fine-tuning the same recipe, so the rows of a
table differ only in what the paper's row changes. Pre-training runs in
BERT's two phases, scaled down as the demo's: most updates on short records,
then a short phase at the fine-tuning length started from the first phase's
output folder, so that the later position embeddings are trained too. Jobs with equal settings
share one cache entry, across rows and across tables: Table 5's BERT row,
Table 7's pre-training and Table 8's 80/10/10 row are one run.

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

import csv
import dataclasses
import io
import math
import os
import statistics
from pathlib import Path
from typing import Mapping, Sequence

from core.atomic import write_atomically
from data_prep.corpora.builtin_corpus import news_sample_path, wikipedia_sample_path
from data_prep.corpora.oanc import oanc_sample_path
from data_prep.corpora.rotten_tomatoes import pretraining_corpus_path, sst2_layout_dir
from data_prep.corpora.wsj_pos import tag_set, wsj_conll_dir
from experiments.jobs import Dataset, Job, Output

TABLES = ("5", "6", "7", "8", "fig5", "gpt_layers")
GLUE_TASKS = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI")
# GPT encodes these pairs in both orders (its input for similarity, which has no order).
GPT_SIMILARITY_TASKS = ("mrpc", "qqp", "sts-b")
PROGRESS_SAVE_STEPS = 500  # a pre-training run's steps between saves, whatever its key says
FEATURE_LAYERS = ("embeddings", "second_to_last", "last", "sum_last_four",
                  "concat_last_four", "sum_all")


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
                     glue_tasks: Sequence[str] = (), squad_dir: str | None = None) -> Datasets:
    """The built-in corpora and tasks (fetched into the cache on first use), plus GLUE folders."""
    # The user's folders are checked before anything is fetched.
    glue, squad = glue_datasets(glue_dir, glue_tasks), squad_datasets(squad_dir)
    corpus = Dataset("corpus", tuple(pretraining_corpus_files()))
    sentiment = tagging = None
    if "sentiment" in scale.tasks:
        sentiment = Dataset("sentiment", (sentiment_subset(
            sst2_layout_dir(), work_dir / "datasets", scale.sentiment_train_examples),))
    if "tagging" in scale.tasks:
        tagging = Dataset("tagging", (wsj_conll_dir(),))
    return Datasets(corpus, sentiment, tagging, glue, squad)


def sentiment_subset(source: Path, folder: Path, train_examples: int | None) -> Path:
    """The first `train_examples` training lines of an SST-2 folder and all of its dev set.

    The test file is left out: it has no labels, and the grid never predicts it.
    """
    if train_examples is None:
        target = folder / "sentiment_all"
    else:
        target = folder / f"sentiment_{train_examples}"
    if (target / "dev.tsv").is_file():
        return target

    lines = (source / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
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


@dataclasses.dataclass(frozen=True)
class Score:
    """A cell: mean and standard deviation over seeds (as printed), and how it was chosen.

    `values` are the seeds' own scores, kept so that a committed table can be
    checked and redrawn without the cache that produced it.
    """
    mean: float
    std: float
    count: int
    detail: str = ""
    values: tuple[float, ...] = ()


class Cell:
    """One number of a table and the jobs it needs."""
    jobs: list[Job]

    def score(self, results: Mapping[str, dict]) -> Score:
        raise NotImplementedError


class SweepCell(Cell):
    """`run_classifier.py` sweep: the rate with the best mean dev score, its restarts' spread."""
    def __init__(self, job: Job):
        self.jobs = [job]

    def score(self, results: Mapping[str, dict]) -> Score:
        by_rate: dict[float, list[float]] = {}
        for rate, _, value in results[self.jobs[0].key]["sweep"]:
            if not math.isnan(value):
                by_rate.setdefault(rate, []).append(100 * value)
        if not by_rate:
            return Score(math.nan, math.nan, 0, "every run diverged")
        rate = max(by_rate, key=lambda r: statistics.mean(by_rate[r]))
        return _summary(by_rate[rate], f"lr {rate:g}")


class SeedsCell(Cell):
    """Separate runs per (rate, seed): rate chosen on `select`, `report` of its seeds shown."""
    def __init__(self, runs: Mapping[float, Sequence[Job]], select: str, report: str,
                 factor: float = 100):
        self.runs, self.select, self.report, self.factor = runs, select, report, factor
        self.jobs = [job for jobs in runs.values() for job in jobs]

    def score(self, results: Mapping[str, dict]) -> Score:
        def values(jobs, key):
            return [self.factor * results[job.key]["eval_results"][key] for job in jobs]

        rate = max(self.runs, key=lambda r: statistics.mean(values(self.runs[r], self.select)))
        return _summary(values(self.runs[rate], self.report), f"lr {rate:g}")


class MetricCell(Cell):
    """One number from a pre-training evaluation (perplexity, masked-LM accuracy)."""
    def __init__(self, job: Job, metrics: Sequence[str], percent: bool = False):
        self.jobs, self.metrics, self.percent = [job], metrics, percent

    def score(self, results: Mapping[str, dict]) -> Score:
        found = results[self.jobs[0].key]["eval_results"]
        metric = next(name for name in self.metrics if name in found)
        value = found[metric] * (100 if self.percent else 1)
        return Score(value, math.nan, 1, metric, (value,))


def _summary(values: list[float], detail: str) -> Score:
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return Score(statistics.mean(values), spread, len(values), detail, tuple(values))


@dataclasses.dataclass
class Row:
    name: str
    cells: dict[str, Cell | None]  # None: not applicable (the reason is in the table's notes)
    paper: dict[str, float] = dataclasses.field(default_factory=dict)
    series: str = ""  # the figure's line and x value
    step: int = 0
    pretraining: Job | None = None  # whose training curve stands for the row


@dataclasses.dataclass
class Table:
    name: str
    title: str
    columns: list[str]
    rows: list[Row]
    paper_columns: dict[str, str]  # our column -> the paper's column shown beside it
    notes: list[str]
    figure: bool = False
    x_label: str = "pre-training steps"  # the figure's x axis (each row's `step`)

    @property
    def jobs(self) -> list[Job]:
        return [job for row in self.rows for cell in row.cells.values() if cell
                for job in cell.jobs]


def model_shape(layers: int, hidden: int) -> dict:
    """A BERT config of the small family: A = H/64 heads (at least 2), 4H feed-forward."""
    return {"hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": max(2, hidden // 64), "intermediate_size": 4 * hidden,
            "max_position_embeddings": 512, "hidden_act": "gelu"}


class GridBuilder:
    """Builds the jobs of the tables for one scale, data and seed count."""
    def __init__(self, scale: Scale, data: Datasets, seeds: int):
        self.scale, self.data, self.seeds = scale, data, seeds
        self.vocab = Job("-m data_prep.vocab", {"vocab_size": scale.vocab_size,
                                                "do_lower_case": True},
                         {"input_file": data.corpus}, output_flag="output_file",
                         output_name="vocab.txt")
        self._labels = None

    # -- pre-training -------------------------------------------------------------------
    def records(self, phase: int, nsp: bool = True, masked_lm_prob: float = 0.15,
                mask_ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> Job:
        """Pre-training data of phase `phase` (from 0); `mask_ratios`: [MASK], random, unchanged."""
        settings = self.scale.phases[phase]
        return Job("-m data_prep.create_pretraining_data", {
            "do_lower_case": True, "max_seq_length": settings.max_seq_length,
            "max_predictions_per_seq": settings.max_predictions_per_seq,
            "masked_lm_prob": masked_lm_prob, "dupe_factor": settings.dupe_factor,
            "short_seq_prob": 0.1, "random_seed": 12345 + phase, "no_nsp": not nsp,
            "mask_ratios": ",".join(f"{share:g}" for share in mask_ratios),
            # One chunk holds the whole corpus, so the sources' instances are shuffled together.
            "documents_per_chunk": 100_000},
            {"input_file": self.data.corpus, "vocab_file": Output(self.vocab, "vocab.txt")},
            output_flag="output_file", output_name="records.tfrecord")

    def pretrain_phases(self, objective: str, shape: tuple[int, int],
                        first_save_every: int | None = None, **records) -> list[Job]:
        """One run per phase, each started from the last one's output folder.

        `records` are the data options of `records()`, the same in every
        phase; `first_save_every` keeps the first phase's intermediate
        checkpoints (the figure reads them).
        """
        runs: list[Job] = []
        for number, phase in enumerate(self.scale.phases):
            save_every = (first_save_every if number == 0 else None) or phase.steps
            # Saves more often than the key says, so a killed run loses little.
            progress = min(save_every, PROGRESS_SAVE_STEPS)
            start = {"init_checkpoint": Output(runs[-1])} if runs else {}
            runs.append(Job("run_pretraining.py", {
                "do_train": True, "do_eval": True, "objective": objective,
                "max_seq_length": phase.max_seq_length,
                "max_predictions_per_seq": phase.max_predictions_per_seq,
                "num_train_steps": phase.steps, "num_warmup_steps": phase.warmup,
                "train_batch_size": phase.batch, "learning_rate": phase.learning_rate,
                "save_checkpoints_steps": save_every,
                "keep_checkpoint_max": phase.steps // save_every + 1,
                "max_eval_steps": self.scale.max_eval_steps, "random_seed": 12345,
                "log_every": max(1, min(250, phase.steps // 10)),
                "iterations_per_loop": min(50, save_every),
                "jit_compile": self.scale.jit_compile},
                {"input_file": Output(self.records(number, **records), "records*"),
                 "vocab_file": Output(self.vocab, "vocab.txt"), **start},
                model=model_shape(*shape), resumable=True,
                save_every=progress if progress < save_every else None))
        return runs

    def pretrain(self, objective: str, shape: tuple[int, int], **records) -> Job:
        """The last phase's run: the pre-trained model the downstream tasks start from."""
        return self.pretrain_phases(objective, shape, **records)[-1]

    def evaluate(self, pretrained: Job, step: int) -> Job:
        """The masked-LM (or LM) evaluation of an intermediate checkpoint."""
        settings = {key: pretrained.settings[key] for key in (
            "objective", "max_seq_length", "max_predictions_per_seq", "max_eval_steps",
            "random_seed", "jit_compile")}
        return Job("run_pretraining.py", {**settings, "do_eval": True},
                   {"input_file": pretrained.inputs["input_file"],
                    "bert_config_file": Output(pretrained, "bert_config.json"),
                    "init_checkpoint": Output(pretrained, f"ckpt-{step}")},
                   keep=("eval_results.txt",))

    # -- fine-tuning ----------------------------------------------------------------------
    def _start(self, pretrained: Job, step: int | None) -> dict:
        checkpoint = f"ckpt-{step}" if step else "export/bert_model.ckpt"
        return {"vocab_file": Output(self.vocab, "vocab.txt"),
                "bert_config_file": Output(pretrained, "bert_config.json"),
                "init_checkpoint": Output(pretrained, checkpoint)}

    def classify(self, pretrained: Job, data: Dataset, task: str, causal: bool = False,
                 step: int | None = None, transfer: dict | None = None,
                 head: dict | None = None) -> SweepCell:
        """A sweep; from an intermediate first-phase checkpoint (`step`), at that phase's length.

        `transfer` ({"transfer_layers": N} or empty) starts from the first N blocks only;
        `head` ({"bilstm_units": N} or empty) adds a BiLSTM under the output layer.
        """
        scale = self.scale
        length = {"max_seq_length": scale.phases[0].max_seq_length} if step else {}
        length.update(transfer or {})
        length.update(head or {})
        if causal and task.lower() in GPT_SIMILARITY_TASKS:
            length["both_orders"] = True  # GPT's similarity input
        return SweepCell(Job("run_classifier.py", {
            "task_name": task, "do_train": True, "do_eval": True, "causal": causal,
            "learning_rates": ",".join(f"{rate:g}" for rate in scale.learning_rates),
            "num_restarts": self.seeds, "random_seed": 1, "export_saved_model": False,
            "jit_compile": scale.jit_compile, "log_every": 1000, **scale.classifier, **length},
            {"data_dir": data, **self._start(pretrained, step)},
            keep=("*.txt", "*.tsv")))

    def tag(self, pretrained: Job, feature_layers: str | None = None,
            causal: bool = False, transfer: dict | None = None,
            head: dict | None = None) -> SeedsCell:
        """Fine-tuned tagging (left-to-right with `causal`), or the frozen-feature BiLSTM."""
        scale = self.scale
        mode = {"mode": "fine_tune"} if feature_layers is None else {
            "mode": "feature_based", "feature_layers": feature_layers, **scale.feature_tagger}
        if causal:  # only then: the bidirectional runs keep their cache keys
            mode["causal"] = True
        mode.update(transfer or {})
        mode.update(head or {})
        rates = scale.learning_rates if feature_layers is None else \
            (scale.feature_tagger["learning_rate"],)
        runs = {}
        for rate in rates:
            runs[rate] = [Job("run_ner.py", {
                "labels": self.labels(), "do_train": True, "do_eval": True,
                "do_predict": True, "learning_rate": rate, "random_seed": seed,
                "jit_compile": scale.jit_compile, "log_every": 1000, **scale.tagger, **mode},
                {"data_dir": self.data.tagging, **self._start(pretrained, None)},
                keep=("*.txt",)) for seed in range(1, self.seeds + 1)]
        return SeedsCell(runs, "eval_f1", "test_f1")

    def answer(self, pretrained: Job, causal: bool = False, head: dict | None = None
               ) -> SeedsCell:
        """SQuAD v1.1 fine-tuning per (rate, seed); dev F1, the rate chosen on its mean."""
        train, dev = self.data.squad
        mode = {"causal": True, **(head or {})} if causal else dict(head or {})
        runs = {rate: [Job("run_squad.py", {
            "do_train": True, "do_eval": True, "learning_rate": rate, "random_seed": seed,
            "jit_compile": self.scale.jit_compile, "log_every": 1000, **self.scale.squad,
            **mode},
            {"train_file": train, "predict_file": dev, **self._start(pretrained, None)},
            keep=("*.txt",)) for seed in range(1, self.seeds + 1)]
            for rate in self.scale.learning_rates}
        return SeedsCell(runs, "f1", "f1", factor=1)  # already in percent

    def labels(self) -> str:
        """The tag set of all three files (two tags occur only in test), quoted for absl."""
        if self._labels is None:

            text = io.StringIO()
            csv.writer(text).writerow(tag_set(self.data.tagging.paths[0]))  # one tag is ","
            self._labels = text.getvalue().strip()
        return self._labels

    def downstream(self, pretrained: Job, causal: bool = False, step: int | None = None,
                   transfer: dict | None = None, head: dict | None = None
                   ) -> dict[str, Cell | None]:
        """The sentiment, tagging and GLUE cells of one pre-trained model."""
        cells: dict[str, Cell | None] = {}
        if self.data.sentiment is not None:
            cells["sentiment"] = self.classify(pretrained, self.data.sentiment, "sst-2", causal,
                                               step, transfer, head)
        if self.data.tagging is not None and step is None:
            cells["tagging"] = self.tag(pretrained, causal=causal, transfer=transfer, head=head)
        for task, data in self.data.glue:
            cells[task] = self.classify(pretrained, data, task, causal, step, head=head)
        if self.data.squad is not None and step is None:
            cells["SQuAD"] = self.answer(pretrained, causal, head)
        return cells

    # -- tables -------------------------------------------------------------------------
    def columns(self, *extra: str) -> list[str]:
        names = []
        if self.data.sentiment is not None:
            names.append("sentiment")
        if self.data.tagging is not None:
            names.append("tagging")
        names += [task for task, _ in self.data.glue]
        if self.data.squad is not None:
            names.append("SQuAD")
        return [*extra, *names]

    def table(self, name: str) -> Table:
        return {"5": self.table5, "6": self.table6, "7": self.table7, "8": self.table8,
                "fig5": self.figure5, "gpt_layers": self.gpt_layers}[name]()

    def table5(self) -> Table:
        shape = self.scale.base_model
        bert = self.pretrain("mlm_nsp", shape)
        no_nsp = self.pretrain("mlm", shape, nsp=False)
        ltr = self.pretrain("ltr", shape, nsp=False, masked_lm_prob=0.0)
        paper = {
            "BERT (MLM + NSP)": (84.4, 88.4, 86.7, 92.7, 88.5),
            "No NSP": (83.9, 84.9, 86.5, 92.6, 87.9),
            "LTR & No NSP": (82.1, 84.3, 77.5, 92.1, 77.8),
            "+ BiLSTM": (82.1, 84.1, 75.7, 91.6, 84.9)}
        columns = self.columns()
        bilstm = {"bilstm_units": shape[1]}  # as wide as the encoder, per direction
        rows = [Row("BERT (MLM + NSP)", self.downstream(bert), pretraining=bert),
                Row("No NSP", self.downstream(no_nsp), pretraining=no_nsp),
                Row("LTR & No NSP", self.downstream(ltr, causal=True), pretraining=ltr),
                Row("+ BiLSTM", self.downstream(ltr, causal=True, head=bilstm))]
        for row in rows:
            row.paper = _paper_glue(paper[row.name])
        return Table("5", "Pre-training tasks", columns, rows, _paper_column_names(columns), [
            "The left-to-right model is fine-tuned with `run_classifier.py --causal` "
            "(the last token's vector classifies; on MRPC, QQP and STS-B with GPT's "
            "`--both_orders`, both orders of the pair added), and with `--causal` of "
            "`run_ner.py` and `run_squad.py` (each token's tag or span score sees only the "
            "tokens up to it, as the paper's LTR model on SQuAD).",
            f"`+ BiLSTM`: the left-to-right model fine-tuned with a randomly initialized "
            f"BiLSTM of {shape[1]} units per direction on top (`--bilstm_units`): tagging "
            "and SQuAD read its outputs, sentiment its two final states.",
            "Tagging has no column in the paper's Table 5 (its token-level task is SQuAD, "
            "where LTR loses 10.9 F1)."])

    def table6(self) -> Table:
        rows = []
        for layers, hidden in self.scale.table6_models:
            pretrained = self.pretrain("mlm_nsp", (layers, hidden))
            cells: dict[str, Cell | None] = {
                "perplexity": MetricCell(pretrained, ("perplexity",))}
            cells.update(self.downstream(pretrained))
            heads = model_shape(layers, hidden)["num_attention_heads"]
            rows.append(Row(f"L{layers}/H{hidden}/A{heads}", cells, pretraining=pretrained))
        return Table("6", "Model size", self.columns("perplexity"), rows, {}, [
            "Masked-LM perplexity on the pre-training records (the paper: held-out training "
            "data), all sizes after the same number of updates.",
            "The paper's sizes are much larger and do not line up with these rows; its "
            "numbers (L/H/A: perplexity, MNLI-m, MRPC, SST-2): 3/768/12: 5.84, 77.9, 79.8, "
            "88.4; 6/768/3: 5.24, 80.6, 82.2, 90.7; 6/768/12: 4.68, 81.9, 84.8, 91.3; "
            "12/768/12: 3.99, 84.4, 86.7, 92.9; 12/1024/16: 3.54, 85.7, 86.9, 93.3; "
            "24/1024/16: 3.23, 86.6, 87.8, 93.7."])

    def table7(self) -> Table:
        if self.data.tagging is None:
            raise ValueError("Table 7 is about tagging: the scale leaves the tagging task out")
        shape = self.scale.feature_model or self.scale.base_model
        if shape[0] < 4:
            raise ValueError(f"Table 7 reads the last four blocks, but the {self.scale.name} "
                             f"scale's model has {shape[0]}: set its feature_model")
        pretrained = self.pretrain("mlm_nsp", shape)
        paper = {"fine-tune all": 96.4, "embeddings": 91.0, "second_to_last": 95.6,
                 "last": 94.9, "sum_last_four": 95.9, "concat_last_four": 96.1,
                 "sum_all": 95.5}
        rows = [Row("fine-tune all", {"tagging": self.tag(pretrained)},
                    {"tagging": paper["fine-tune all"]}, pretraining=pretrained)]
        for layers in FEATURE_LAYERS:
            rows.append(Row(layers, {"tagging": self.tag(pretrained, layers)},
                            {"tagging": paper[layers]}))
        return Table("7", "Feature-based vs fine-tuning (tagging)", ["tagging"], rows,
                     {"tagging": "CoNLL-2003 NER dev F1"}, [
            "Feature-based rows: the frozen encoder's layers feed a two-layer BiLSTM "
            f"of {self.scale.feature_tagger['lstm_units']} units per direction "
            "(`run_ner.py --mode=feature_based`); `sum_all` sums the embeddings and every "
            "block, as the paper's 'all 12 layers'.",
            f"The model is L{pretrained.model['num_hidden_layers']}/"
            f"H{pretrained.model['hidden_size']}, pre-trained like the others: the "
            "last-four rows need at least four blocks."])

    def table8(self) -> Table:
        strategies = {  # MASK / SAME / RND, as the paper writes them, with its numbers
            (80, 10, 10): (84.2, 95.4, 94.9), (100, 0, 0): (84.3, 94.9, 94.0),
            (80, 0, 20): (84.1, 95.2, 94.6), (80, 20, 0): (84.4, 95.2, 94.7),
            (0, 20, 80): (83.7, 94.8, 94.6), (0, 0, 100): (83.6, 94.9, 94.6)}
        columns = self.columns()
        if self.data.tagging is not None:
            columns.insert(columns.index("tagging") + 1, "tagging (feature-based)")
        layers, _ = self.scale.base_model
        feature_layers = "concat_last_four" if layers >= 4 else "sum_all"
        rows = []
        for (mask, same, random), numbers in strategies.items():
            pretrained = self.pretrain("mlm_nsp", self.scale.base_model,
                                       mask_ratios=(mask / 100, random / 100, same / 100))
            cells = self.downstream(pretrained)
            if self.data.tagging is not None:
                cells["tagging (feature-based)"] = self.tag(pretrained, feature_layers)
            paper = {"sentiment": numbers[0], "tagging": numbers[1],
                     "tagging (feature-based)": numbers[2]}
            if any(task == "MNLI" for task, _ in self.data.glue):
                paper["MNLI"] = numbers[0]
            rows.append(Row(f"{mask}/{same}/{random}", cells, paper, pretraining=pretrained))
        return Table("8", "Masking strategies (MASK / SAME / RND)", columns, rows, {
            "sentiment": "MNLI", "tagging": "NER fine-tune",
            "tagging (feature-based)": "NER feature-based", "MNLI": "MNLI"}, [
            "The paper fine-tunes MNLI where we fine-tune sentiment; its MNLI numbers are shown "
            "beside ours to compare the spread between strategies, not the level.",
            f"Feature-based: {feature_layers}; the paper concatenates the last four layers "
            "(`concat_last_four`), which a model of fewer than four blocks does not have, "
            "and then the sum of all layers (`sum_all`, 95.5 in its Table 7) stands in."])

    def figure5(self) -> Table:
        first = self.scale.phases[0].steps
        if max(self.scale.figure_steps) > first:
            raise ValueError(f"the {self.scale.name} scale evaluates step "
                             f"{max(self.scale.figure_steps)} of a {first}-step first phase: "
                             "figure_steps must not exceed the first phase's steps")
        rows = []
        save_every = math.gcd(*self.scale.figure_steps)
        for name, objective, records in (
                ("MLM", "mlm", {"nsp": False}),
                ("LTR", "ltr", {"nsp": False, "masked_lm_prob": 0.0})):
            pretrained = self.pretrain_phases(objective, self.scale.base_model, save_every,
                                              **records)[0]
            for step in self.scale.figure_steps:
                cells: dict[str, Cell | None] = {"LM accuracy": MetricCell(
                    self.evaluate(pretrained, step), ("masked_lm_accuracy", "lm_accuracy"),
                    percent=True)}
                cells.update({column: cell for column, cell in self.downstream(
                    pretrained, causal=objective == "ltr", step=step).items()
                    if column != "tagging"})
                rows.append(Row(f"{name} @ {step}", cells, series=name, step=step,
                                pretraining=pretrained))
        columns = [column for column in self.columns("LM accuracy") if column != "tagging"]
        return Table("fig5", "Pre-training steps: MLM vs LTR", columns, rows, {}, [
            "Both objectives without next-sentence prediction, so only the direction differs. "
            "The points are checkpoints of the first pre-training phase, fine-tuned at its "
            f"length ({self.scale.phases[0].max_seq_length} tokens). "
            "LM accuracy is masked-LM accuracy for MLM and next-token accuracy for LTR: "
            "different tasks, each shown against its own steps.",
            "The paper (Figure 5) plots MNLI dev accuracy: MLM converges slightly slower than "
            "LTR but outperforms it in absolute accuracy almost immediately."],
            figure=True)

    def gpt_layers(self) -> Table:
        """GPT's Figure 2 (left): fine-tuning from the first k pre-trained blocks, k = 0..L."""
        blocks = self.scale.base_model[0]
        rows = []
        for name, objective, causal, records in (
                ("bidirectional (MLM)", "mlm", False, {"nsp": False}),
                ("left-to-right (LM)", "ltr", True, {"nsp": False, "masked_lm_prob": 0.0})):
            pretrained = self.pretrain(objective, self.scale.base_model, **records)
            for layers in range(blocks + 1):
                cells = {column: cell for column, cell in self.downstream(
                    pretrained, causal, transfer=_transfer(layers, blocks)).items()
                    if column in ("sentiment", "tagging")}
                rows.append(Row(f"{name}, {layers} of {blocks} blocks", cells, series=name,
                                step=layers, pretraining=pretrained))
        columns = [column for column in self.columns() if column in ("sentiment", "tagging")]
        return Table("gpt_layers", "Transferring the first k pre-trained blocks", columns,
                     rows, {}, [
            "GPT (Radford et al., 2018), Figure 2 left: fine-tuning starts from the "
            "pre-trained embeddings and the first k blocks; the blocks above and the pooler "
            "start random (`--transfer_layers=k`). Both models are Table 5's No NSP and "
            "LTR pre-trainings, so the all-blocks points are Table 5's cells.",
            "GPT found that each transferred layer helps, up to about 9% on MultiNLI with "
            "all 12 layers."], figure=True, x_label="pre-trained blocks transferred")


def _transfer(layers: int, blocks: int) -> dict:
    """The fine-tuning flag for the first `layers` blocks; none for all (Table 5's runs)."""
    return {} if layers == blocks else {"transfer_layers": layers}


def _paper_glue(numbers: tuple[float, ...]) -> dict[str, float]:
    mnli, qnli, mrpc, sst2, squad = numbers
    return {"sentiment": sst2, "MNLI": mnli, "QNLI": qnli, "MRPC": mrpc, "SST-2": sst2,
            "SQuAD": squad}


def _paper_column_names(columns: Sequence[str]) -> dict[str, str]:
    names = {"sentiment": "SST-2", "MNLI": "MNLI-m", "QNLI": "QNLI", "MRPC": "MRPC",
             "SST-2": "SST-2", "SQuAD": "SQuAD v1.1 F1"}
    return {column: names[column] for column in columns if column in names}
