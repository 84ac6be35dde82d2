"""The whole pipeline on real data, on a 2-core CPU, in about fifteen minutes: `make demo`.

1. real text, about a million words: ~100 English Wikipedia articles, 300
   news stories, 20,000 sentences of American magazine prose (the Open
   American National Corpus sample) and the unlabelled Rotten Tomatoes text
   that is fair to read before fine-tuning (training-split snippets and
   plot synopses; never a dev or test snippet);
2. `data_prep.vocab`: an 8000-piece uncased WordPiece vocabulary learned
   from that text;
3. `data_prep.create_pretraining_data`: masked-LM and next-sentence
   TFRecords of 32 tokens for phase 1 and of 64 tokens for phase 2;
4. `run_pretraining.py`: a small BERT (2 layers, hidden 128, the BERT-Tiny
   shape) pre-trained from scratch in BERT's two phases, most of the time
   budget on the short records, then a short phase on the long ones started
   from phase 1's weights; each phase is evaluated (masked-LM and
   next-sentence accuracy);
5. the same architecture fine-tuned from random weights and from the
   weights just pre-trained, on two real tasks, with the same recipe search
   for both: every learning rate of a small grid, three seeds each, and the
   rate with the best mean dev score is reported (mean and spread over its
   seeds):
   - `run_classifier.py`: Rotten Tomatoes sentiment (SST-2 layout; 1500
     training snippets of the fixed split, the whole 2000-snippet dev set);
   - `run_ner.py`: part-of-speech tagging of real WSJ sentences
     (`data_prep.corpora.wsj_pos`; rate chosen on validation F1, test F1 reported);
6. a table of the scores.

The runs are those of the ablation grids (`experiments`): the `cpu` scale's
model, first phase and fine-tuning recipe, built by its `GridBuilder` and
run by its job engine, each run printed before it starts, so the demo
doubles as a worked example. Each run is cached under a hash of its settings
in the output folder: an interrupted demo continues where it stopped, and a
finished one prints its table again at once. The random-init baseline needs
no pre-training, so its runs start at once, one at a time at the lowest
priority (`experiments.schedule`): they take the CPU time pre-training leaves
idle. The fine-tunings then run side by side, one per core. Everything is
written under `demo_output/` (or the folder given as the only argument).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path

from cli import quiet_start  # noqa: F401  (before TensorFlow loads: hides its start-up lines)
from experiments import jobs, schedule
from experiments.cells import Score, SeedsCell, SweepCell
from experiments.grid import GridBuilder
from experiments.scales import SCALES, Datasets, Phase, default_datasets, model_shape

# BERT's own two phases (Appendix A.2), scaled down as the `cpu` scale's:
# most updates on short records, where a step is cheap and the model leaves
# the word-frequency plateau sooner, then a short phase at the fine-tuning
# length so that the later position embeddings are trained too (here 300
# steps, where the grids take 400). Small models pre-trained from scratch on
# little text want a large rate with warmup (Turc et al., 2019).
# Next-sentence prediction stays, as in the paper: it is the only objective
# that trains the [CLS] vector and the pooler the classifier reads. At this
# scale, dropping it cost 2.4 points of sentiment accuracy (Table 5 in
# experiments/results/) and gave nothing back on tagging.
CPU = SCALES["cpu"]
DEMO = dataclasses.replace(CPU, name="demo", phases=(CPU.phases[0], Phase(
    max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, steps=300, warmup=30,
    batch=64, learning_rate=5e-4)), data_seed=12346)  # the records the README's table used
DEMO_MODEL = model_shape(*DEMO.base_model)  # L2/H128/A2, the BERT-Tiny shape
SEEDS = 3  # per learning rate; seeds 1, 2, 3
OBJECTIVE = "mlm_nsp"


@dataclasses.dataclass
class Initialization:
    """One row of the table: the fine-tunings from one starting point, and their scores."""
    name: str
    sentiment: SweepCell
    tagging: SeedsCell  # rate chosen on validation F1, test F1 reported

    @property
    def runs(self) -> list[jobs.Job]:
        return [*self.sentiment.jobs, *self.tagging.jobs]

    def scores(self, results: dict) -> tuple[Score, Score, Score]:
        """Sentiment dev, tagging validation and tagging test, each at its chosen rate."""
        validation = SeedsCell(self.tagging.runs, "eval_f1", "eval_f1")
        return (self.sentiment.score(results), validation.score(results),
                self.tagging.score(results))


def describe(builder: GridBuilder) -> tuple[list[jobs.Job], list[Initialization]]:
    """The demo's runs: the pre-training phases, and each initialization's fine-tunings."""
    phases = builder.pretrain_phases(OBJECTIVE, DEMO.base_model)
    rows = []
    for name, pretrained in (("small BERT, random init", None),
                             ("small BERT, pre-trained above", phases[-1])):
        rows.append(Initialization(
            name, builder.classify(pretrained, builder.data.sentiment, "sst-2"),
            builder.tag(pretrained)))
    return phases, rows


def clear_other_recipes(cache: jobs.Cache, every: list[jobs.Job]) -> list[Path]:
    """Removes the runs of the cache that this recipe does not have; returns their folders.

    The demo's folder holds one recipe's runs, not the history of every
    recipe tried in it; anything else in the folder is left alone.
    """
    keys = {job.key for job in every}
    runs = cache.root / "runs"
    stale = sorted(path for path in (runs.iterdir() if runs.is_dir() else [])
                   if path.name not in keys)
    if stale:
        print(f"{runs} holds {len(stale)} runs of another demo recipe: removing them", flush=True)
    for path in stale:
        shutil.rmtree(path)
    return stale


def main() -> None:
    output = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_output").resolve()
    builder = GridBuilder(DEMO, default_datasets(DEMO, output), SEEDS)
    phases, rows = describe(builder)
    cache = jobs.Cache(output)
    every = schedule.all_jobs([*phases, *(job for row in rows for job in row.runs)])
    clear_other_recipes(cache, every)
    schedule.run_grid([builder.vocab], cache)
    # The random-init runs need nothing from pre-training: they fill its idle CPU time.
    baseline = schedule.run_in_idle_time(rows[0].runs, cache)
    started = time.monotonic()
    schedule.run_grid(phases, cache)  # one run at a time, each with every core
    left = baseline.stop()
    if baseline.items:
        print(f"\n({len(baseline.items) - len(left)} of the {len(baseline.items)} random-init "
              f"runs finished beside pre-training, in {time.monotonic() - started:.0f} s.)")
    started = time.monotonic()
    # The long sentiment sweeps first, so that no core idles at the end.
    results = schedule.run_grid(every, cache, workers=os.cpu_count() or 1,
                                rank=lambda job: 0 if job.tool == "run_classifier.py" else 1)
    seconds = time.monotonic() - started
    print_results(builder.data, phases, rows, results)
    stages = {"vocabulary": results[builder.vocab.key]["seconds"]}
    for number, phase in enumerate(phases, start=1):
        stages[f"data {number}"] = results[phase.inputs["input_file"].job.key]["seconds"]
        stages[f"pre-training {number}"] = results[phase.key]["seconds"]
    stages["fine-tuning"] = seconds
    print("\nSeconds per stage: "
          + ", ".join(f"{name} {value:.0f}" for name, value in stages.items()))
    print(f"Outputs are under {output}")


def print_results(data: Datasets, phases: list[jobs.Job], rows: list[Initialization],
                  results: dict) -> None:
    """The demo's table: each phase's pre-training metrics, then one row per initialization."""
    print("\n=== Results")
    for number, (phase, job) in enumerate(zip(DEMO.phases, phases), start=1):
        found = results[job.key]["eval_results"]
        print(f"Pre-training phase {number} ({phase.steps} steps of {phase.batch} x "
              f"{phase.max_seq_length} tokens): masked-LM accuracy "
              f"{found['masked_lm_accuracy']:.3f}, next-sentence accuracy "
              f"{found['next_sentence_accuracy']:.3f}")
    dev = (data.sentiment.paths[0] / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    labels = [line.rsplit("\t", 1)[1] for line in dev]
    majority = max(labels.count(label) for label in set(labels)) / len(labels)
    print(f"\nMean ± standard deviation over seeds "
          f"{', '.join(str(seed) for seed in range(1, SEEDS + 1))}, at the learning rate (of "
          f"{', '.join(f'{rate:g}' for rate in DEMO.learning_rates)}) with the best mean dev "
          "score:")
    print(f"- sentiment: Rotten Tomatoes dev accuracy (%), {DEMO.sentiment_train_examples} "
          f"training snippets, {len(labels)} dev; the majority class scores "
          f"{100 * majority:.1f}")
    print("- tagging: WSJ part-of-speech F1 (%), 801 training sentences, rate chosen on the "
          "100 validation sentences, 100 test sentences")
    width = max(len(row.name) for row in rows)
    print(f"\n  {'':<{width}}  {'sentiment dev':>21}  {'tagging validation':>21}  "
          f"{'tagging test':>21}")
    scores = [row.scores(results) for row in rows]
    for row, (sentiment, validation, test) in zip(rows, scores):
        print(f"  {row.name:<{width}}  {_summary(sentiment)}  {_summary(validation)}  "
              f"{_summary(test)}")
    (random_dev, _, random_test), (ours_dev, _, ours_test) = scores
    print(f"\nPre-training gains {ours_dev.mean - random_dev.mean:+.1f} points of sentiment "
          f"accuracy and {ours_test.mean - random_test.mean:+.1f} points of tagging test F1 "
          "over random initialization.")
    print("(The real MiniLM, pre-trained at scale, is left out to keep the demo short; "
          "`make real-check`\nfine-tunes it on the same sentiment data.)")


def _summary(score: Score) -> str:
    """`mean ± std (lr r)`: the mean and spread over the seeds at the chosen rate, in percent."""
    return f"{score.mean:5.1f} ± {score.std:4.1f} ({score.detail})"


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, jobs.JobFailed) as error:
        print(f"demo.py: error: {error}", file=sys.stderr)
        sys.exit(1)

