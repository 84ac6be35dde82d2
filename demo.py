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

Each step runs the real command-line tool, printed before it runs, so the
demo doubles as a worked example; the fine-tuning runs go side by side, one
per core, each logging to a file next to its outputs. The random-init
baseline needs no pre-training, so its runs start at once, one at a time at
the lowest priority: they take the CPU time pre-training leaves idle. Everything is written
under `demo_output/` (or the folder given as the only argument).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import statistics
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from data_prep.corpora.builtin_corpus import news_sample_path, wikipedia_sample_path
from data_prep.corpora.oanc import oanc_sample_path
from data_prep.corpora.rotten_tomatoes import pretraining_corpus_path, sst2_layout_dir
from data_prep.corpora.wsj_pos import tag_set, wsj_conll_dir

VOCAB_SIZE = 8000
SMALL_BERT = {"hidden_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 512,
              "max_position_embeddings": 512, "hidden_act": "gelu"}
# BERT's own two phases (Appendix A.2), scaled down: most updates on short
# records, where a step is cheap and the model leaves the word-frequency
# plateau sooner, then a short phase at the fine-tuning length so that the
# later position embeddings are trained too. Small models pre-trained from
# scratch on little text want a large rate with warmup (Turc et al., 2019).
# Next-sentence prediction stays, as in the paper: it is the only objective
# that trains the [CLS] vector and the pooler the classifier reads. At this
# scale, dropping it cost 2.4 points of sentiment accuracy (Table 5 in
# experiments/results/) and gave nothing back on tagging.
PHASES = (
    {"max_seq_length": 32, "max_predictions_per_seq": 5, "dupe_factor": 10,
     "num_train_steps": 4500, "num_warmup_steps": 450, "train_batch_size": 128,
     "learning_rate": 1e-3},
    {"max_seq_length": 64, "max_predictions_per_seq": 10, "dupe_factor": 2,
     "num_train_steps": 300, "num_warmup_steps": 30, "train_batch_size": 64,
     "learning_rate": 5e-4},
)
RECORD_FLAGS = ("max_seq_length", "max_predictions_per_seq", "dupe_factor")
# One chunk holds the whole corpus, so instances are shuffled across all of it:
# in chunks of 256 documents, a Wikipedia article's instances (all passes, all
# masks) would come as one long run, followed by a run of news, and so on.
DOCUMENTS_PER_CHUNK = 100_000
SENTIMENT_TRAIN_EXAMPLES = 1500
LEARNING_RATES = (3e-4, 1e-3)
SEEDS = (1, 2, 3)  # consecutive: run_classifier.py's restart k uses --random_seed + k
SENTIMENT = {"max_seq_length": 64, "train_batch_size": 32, "eval_batch_size": 128,
             "num_train_epochs": 3}
TAGGING = {"max_seq_length": 64, "train_batch_size": 16, "eval_batch_size": 64,
           "predict_batch_size": 64, "num_train_epochs": 3}


def tool_environment(threads: int | None = None) -> dict[str, str]:
    """The demo's environment for a tool; `threads` caps its CPU threads for side-by-side runs."""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if threads is not None:
        environment.update(TF_NUM_INTRAOP_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return environment


def run_step(title: str, arguments: list[str]) -> float:
    """Runs one tool in the foreground, echoing its command; returns the seconds it took."""
    print(f"\n=== {title}\n$ {shlex.join(arguments)}", flush=True)
    started = time.monotonic()
    subprocess.run([sys.executable, *arguments], check=True, env=tool_environment())
    return time.monotonic() - started


Job = tuple[list[str], Path]  # a tool's arguments, and the file its output goes to


def run_logged(job: Job, low_priority: bool = False) -> None:
    """Runs one job on one thread, echoing its command; its output goes to its log file."""
    arguments, log = job
    print(f"$ {shlex.join(arguments)} > {log}", flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    nice = ["nice", "-n", "19"] if low_priority and shutil.which("nice") else []
    with open(log, "w", encoding="utf-8") as output:
        finished = subprocess.run([*nice, sys.executable, *arguments], stdout=output,
                                  stderr=subprocess.STDOUT, env=tool_environment(1))
    if finished.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
        raise RuntimeError(f"{arguments[0]} failed (exit {finished.returncode}); "
                           f"the end of {log}:\n" + "\n".join(tail))


def run_side_by_side(title: str, jobs: list[Job]) -> float:
    """Runs the jobs one per core; returns the seconds they took.

    A model this small keeps one core busy far better than two, so separate
    runs side by side finish sooner than the same runs one after another.
    """
    workers = max(1, min(os.cpu_count() or 1, len(jobs)))
    print(f"\n=== {title}: {len(jobs)} runs, {workers} at a time", flush=True)
    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(run_logged, jobs):
            pass
    return time.monotonic() - started


class IdleTimeRunner:
    """Runs jobs one at a time at the lowest priority until `stop()`, in a thread.

    Pre-training keeps the cores busy but not full; a niced job takes only
    what is left. `stop()` waits for the job in hand, which then runs at full
    speed, before the full-priority work starts: put the long jobs first, so
    that the one in hand at the end is a short one.
    """

    def __init__(self, jobs: list[Job]):
        self.waiting = list(jobs)
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.error: BaseException | None = None
        self.thread.start()

    def _work(self) -> None:
        while True:
            with self.lock:
                if self.stopping or not self.waiting:
                    return
                job = self.waiting.pop(0)
            try:
                run_logged(job, low_priority=True)
            except BaseException as error:  # raised again by stop(), in the main thread
                self.error = error
                return

    def stop(self) -> list[Job]:
        """Starts nothing more, waits for the job in hand; returns the jobs not started."""
        with self.lock:
            self.stopping = True
            left = self.waiting
        self.thread.join()
        if self.error is not None:
            raise self.error
        return left


def clear_other_recipes(output: Path) -> None:
    """Removes the demo's own outputs when an earlier run made them with another recipe.

    Each tool resumes from what it finds in its output folder, so a phase-1
    checkpoint of an older recipe would be taken up as this one's. Only the
    demo's own entries are removed, never anything else in the folder.
    """
    recipe = json.dumps({"model": SMALL_BERT, "vocab_size": VOCAB_SIZE, "phases": PHASES,
                         "objective": "mlm_nsp", "sentiment": SENTIMENT, "tagging": TAGGING,
                         "rates": LEARNING_RATES, "seeds": SEEDS}, sort_keys=True)
    stamp = output / "recipe.json"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == recipe:
        return
    ours = ("vocab.txt", "small_bert_config.json", "sentiment_data", "pretraining_data_*",
            "pretraining_*", "sentiment_*", "tagging_*")
    stale = sorted({path for pattern in ours for path in output.glob(pattern)})
    if stale:
        print(f"{output} holds outputs of another demo recipe: removing its {len(stale)} "
              "entries and starting over", flush=True)
    for path in stale:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    stamp.write_text(recipe, encoding="utf-8")


def fine_tuning_jobs(output: Path, vocab: Path, config: Path, sentiment: Path, tagging: Path,
                     checkpoints: list[Path | None]) -> tuple[list[Job], list[list[Job]]]:
    """One sentiment sweep per initialization, and its tagging runs (rate x seed)."""
    shared = flags(vocab_file=vocab, bert_config_file=config, do_train="true", do_eval="true",
                   jit_compile="true", log_every=1000)
    labels = io.StringIO()
    csv.writer(labels).writerow(tag_set(tagging))  # quoted: one tag is ","
    sentiment_jobs, tagging_jobs = [], []
    for index, checkpoint in enumerate(checkpoints):
        start = flags(init_checkpoint=checkpoint) if checkpoint else []
        run_dir = output / f"sentiment_{index}"
        sentiment_jobs.append(([
            "run_classifier.py", *shared, *start, *flags(
                task_name="SST-2", data_dir=sentiment, output_dir=run_dir,
                export_saved_model="false", learning_rates=",".join(map(str, LEARNING_RATES)),
                num_restarts=len(SEEDS), random_seed=SEEDS[0], **SENTIMENT)],
            run_dir / "log.txt"))
        tagging_jobs.append([])
        for rate in LEARNING_RATES:
            for seed in SEEDS:
                run_dir = output / f"tagging_{index}" / f"lr{rate:g}_seed{seed}"
                tagging_jobs[-1].append(([
                    "run_ner.py", *shared, *start, *flags(
                        data_dir=tagging, labels=labels.getvalue().strip(), output_dir=run_dir,
                        do_predict="true", learning_rate=rate, random_seed=seed, **TAGGING)],
                    run_dir / "log.txt"))
    return sentiment_jobs, tagging_jobs


def flags(**values) -> list[str]:
    return [f"--{key}={value}" for key, value in values.items()]


def sentiment_subset(folder: Path) -> Path:
    """The first training lines of the fixed Rotten Tomatoes split and all of its dev set."""
    folder.mkdir(parents=True, exist_ok=True)
    source = sst2_layout_dir()
    lines = (source / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "train.tsv").write_text("".join(lines[:SENTIMENT_TRAIN_EXAMPLES + 1]),
                                      encoding="utf-8")
    (folder / "dev.tsv").write_text((source / "dev.tsv").read_text(encoding="utf-8"),
                                    encoding="utf-8")
    return folder


def read_results(path: Path) -> dict[str, float]:
    results = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" = ")
        results[key] = float(value)
    return results


def best_rate(scores: dict[float, list[float]]) -> float:
    """The learning rate with the highest mean score over its seeds."""
    return max(scores, key=lambda rate: statistics.mean(scores[rate]))


def summary(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):5.1f} ± {100 * spread:4.1f}"


def main() -> None:
    output = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_output").resolve()
    output.mkdir(parents=True, exist_ok=True)
    clear_other_recipes(output)
    corpora = [wikipedia_sample_path(), news_sample_path(), oanc_sample_path(),
               pretraining_corpus_path()]
    corpus = ",".join(str(path) for path in corpora)
    vocab = output / "vocab.txt"
    sentiment = sentiment_subset(output / "sentiment_data")
    tagging = wsj_conll_dir()
    config = output / "small_bert_config.json"
    timings = {}

    timings["vocabulary"] = run_step("WordPiece vocabulary from the real text", [
        "-m", "data_prep.vocab", *flags(input_file=corpus, output_file=vocab,
                                        vocab_size=VOCAB_SIZE, do_lower_case="true")])
    # The learner stops short of VOCAB_SIZE when the corpus has fewer useful pieces.
    learned = len(vocab.read_text(encoding="utf-8").splitlines())
    config.write_text(json.dumps({**SMALL_BERT, "vocab_size": learned}, indent=2) + "\n")
    initializations = {"small BERT, random init": None,
                       "small BERT, pre-trained above":
                           output / f"pretraining_{len(PHASES)}" / "export" / "bert_model.ckpt"}
    sentiment_jobs, tagging_jobs = fine_tuning_jobs(output, vocab, config, sentiment, tagging,
                                                    list(initializations.values()))
    # The random-init runs need nothing from pre-training: they fill its idle CPU time.
    baseline = IdleTimeRunner([sentiment_jobs[0], *tagging_jobs[0]])
    pretraining_results = []
    previous = None
    for number, phase in enumerate(PHASES, start=1):
        records = output / f"pretraining_data_{number}" / "corpus.tfrecord"
        pretrained = output / f"pretraining_{number}"
        record_flags = {key: phase[key] for key in RECORD_FLAGS}
        training = {key: value for key, value in phase.items() if key not in RECORD_FLAGS}
        timings[f"data {number}"] = run_step(
            f"Masked-LM pre-training data, phase {number}", [
                "-m", "data_prep.create_pretraining_data", *flags(
                    input_file=corpus, output_file=records, vocab_file=vocab,
                    do_lower_case="true", **record_flags, masked_lm_prob=0.15,
                    short_seq_prob=0.1, random_seed=12345 + number, no_nsp="false",
                    documents_per_chunk=DOCUMENTS_PER_CHUNK)])
        start = flags(init_checkpoint=previous) if previous else []
        timings[f"pre-training {number}"] = run_step(
            f"Pre-training a small BERT (masked LM + next sentence), phase {number}", [
                "run_pretraining.py", *start, *flags(
                    input_file=records, bert_config_file=config, output_dir=pretrained,
                    vocab_file=vocab, do_train="true", do_eval="true", objective="mlm_nsp",
                    max_seq_length=phase["max_seq_length"],
                    max_predictions_per_seq=phase["max_predictions_per_seq"],
                    **training,
                    save_checkpoints_steps=1000, log_every=250, max_eval_steps=50,
                    iterations_per_loop=50, jit_compile="true")])
        pretraining_results.append(read_results(pretrained / "eval_results.txt"))
        previous = pretrained

    left = baseline.stop()
    print(f"\n({1 + len(tagging_jobs[0]) - len(left)} of the random-init runs finished "
          "beside pre-training.)")
    # The long sentiment sweep first, so that no core idles at the end.
    timings["fine-tuning"] = run_side_by_side(
        "Fine-tuning, random init and pre-trained", [sentiment_jobs[1], *left, *tagging_jobs[1]])

    rows = []
    for index, name in enumerate(initializations):
        sweep = (output / f"sentiment_{index}" / "sweep_results.tsv").read_text().splitlines()
        dev: dict[float, list[float]] = {}
        for row in csv.DictReader(sweep, delimiter="\t"):
            dev.setdefault(float(row["learning_rate"]), []).append(float(row["dev_score"]))
        rate = best_rate(dev)
        valid: dict[float, list[float]] = {}
        test: dict[float, list[float]] = {}
        for tag_rate in LEARNING_RATES:
            for seed in SEEDS:
                results = read_results(output / f"tagging_{index}" /
                                       f"lr{tag_rate:g}_seed{seed}" / "eval_results.txt")
                valid.setdefault(tag_rate, []).append(results["eval_f1"])
                test.setdefault(tag_rate, []).append(results["test_f1"])
        tag_rate = best_rate(valid)
        rows.append((name, rate, dev[rate], tag_rate, valid[tag_rate], test[tag_rate]))

    print("\n=== Results")
    for number, (phase, results) in enumerate(zip(PHASES, pretraining_results), start=1):
        print(f"Pre-training phase {number} ({phase['num_train_steps']} steps of "
              f"{phase['train_batch_size']} x {phase['max_seq_length']} tokens): masked-LM "
              f"accuracy {results['masked_lm_accuracy']:.3f}, next-sentence accuracy "
              f"{results['next_sentence_accuracy']:.3f}")
    dev_labels = [line.rsplit("\t", 1)[1] for line in
                  (sentiment / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    majority = max(dev_labels.count(label) for label in set(dev_labels)) / len(dev_labels)
    print(f"\nMean ± standard deviation over seeds {', '.join(map(str, SEEDS))}, at the "
          f"learning rate (of {', '.join(f'{rate:g}' for rate in LEARNING_RATES)}) with the "
          "best mean dev score:")
    print(f"- sentiment: Rotten Tomatoes dev accuracy (%), {SENTIMENT_TRAIN_EXAMPLES} "
          f"training snippets, {len(dev_labels)} dev; the majority class scores "
          f"{100 * majority:.1f}")
    print("- tagging: WSJ part-of-speech F1 (%), 801 training sentences, rate chosen on the "
          "100 validation sentences, 100 test sentences")
    width = max(len(name) for name in initializations)
    print(f"\n  {'':<{width}}  {'sentiment dev':>21}  {'tagging validation':>21}  "
          f"{'tagging test':>21}")
    for name, rate, dev_scores, tag_rate, valid_scores, test_scores in rows:
        print(f"  {name:<{width}}  {summary(dev_scores)} (lr {rate:g})  "
              f"{summary(valid_scores)} (lr {tag_rate:g})  {summary(test_scores)} "
              f"(lr {tag_rate:g})")
    (_, _, random_dev, _, _, random_test), (_, _, ours_dev, _, _, ours_test) = rows
    sentiment_gain = statistics.mean(ours_dev) - statistics.mean(random_dev)
    tagging_gain = statistics.mean(ours_test) - statistics.mean(random_test)
    print(f"\nPre-training gains {100 * sentiment_gain:+.1f} points of sentiment accuracy and "
          f"{100 * tagging_gain:+.1f} points of tagging test F1 over random initialization.")
    print("(The real MiniLM, pre-trained at scale, is left out to keep the demo short; "
          "`make real-check`\nfine-tunes it on the same sentiment data.)")
    print("\nSeconds per stage: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(f"Outputs are under {output}")


if __name__ == "__main__":
    main()
