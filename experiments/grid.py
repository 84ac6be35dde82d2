"""The runs of a grid: vocabulary, pre-training data and phases, fine-tunings per cell.

Pre-training runs in BERT's two phases, scaled down as the demo's: most
updates on short records, then a short phase at the fine-tuning length
started from the first phase's output folder, so that the later position
embeddings are trained too. Jobs with equal settings share one cache entry,
across rows and across tables: Table 5's BERT row, Table 7's pre-training
and Table 8's 80/10/10 row are one run. Which rows and columns a table has
is in `tables`, which builds on this module. A fine-tuning given no
pre-trained run trains the base model's shape from random weights: the
demo's baseline.
"""

from __future__ import annotations

import csv
import io

from data_prep.corpora.wsj_pos import tag_set
from experiments.cells import Cell, SeedsCell, SweepCell
from experiments.jobs import Dataset, Job, Output
from experiments.scales import Datasets, Scale, model_shape

# GPT encodes these pairs in both orders (its input for similarity, which has no order).
GPT_SIMILARITY_TASKS = ("mrpc", "qqp", "sts-b")
PROGRESS_SAVE_STEPS = 500  # a pre-training run's steps between saves, whatever its key says


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
            "short_seq_prob": 0.1, "random_seed": self.scale.data_seed + phase, "no_nsp": not nsp,
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
    def _start(self, pretrained: Job | None, step: int | None) -> dict:
        """The vocabulary, and the pre-trained model's config and weights (none: random init)."""
        vocab = {"vocab_file": Output(self.vocab, "vocab.txt")}
        if pretrained is None:
            return vocab
        checkpoint = f"ckpt-{step}" if step else "export/bert_model.ckpt"
        return {**vocab, "bert_config_file": Output(pretrained, "bert_config.json"),
                "init_checkpoint": Output(pretrained, checkpoint)}

    def _random_model(self, pretrained: Job | None) -> dict | None:
        """The base model's shape when fine-tuning starts from random weights (no `pretrained`)."""
        return model_shape(*self.scale.base_model) if pretrained is None else None

    def classify(self, pretrained: Job | None, data: Dataset, task: str, causal: bool = False,
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
            model=self._random_model(pretrained), keep=("*.txt", "*.tsv")))

    def tag(self, pretrained: Job | None, feature_layers: str | None = None,
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
                model=self._random_model(pretrained), keep=("*.txt",))
                for seed in range(1, self.seeds + 1)]
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

    # -- columns and tables ---------------------------------------------------------------
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
