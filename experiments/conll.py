"""CoNLL-2003 NER on the paper's data: fine-tuning beside Hugging Face PyTorch, and Table 7.

    python -m experiments.conll --data_dir=../shared/data/conll2003

runs, one after another and each cached under a hash of its settings (a
stopped queue continues where it stopped with the same command, and a
killed `run_ner.py` resumes from its last checkpoint):

1. `run_ner.py` fine-tuning the MiniLM folder at `--learning_rate`, one run
   per seed of `--seeds`, beside Hugging Face PyTorch
   `BertForTokenClassification` fine-tuned from the same folder with the same
   recipe and seeds (`experiments/peers/hf_ner_finetune.py`, run by
   `--torch_python`), both scored on valid.txt by the project's conlleval;
2. the feature-based rows of Table 7 (`run_ner.py --mode=feature_based`,
   one per `--feature_layers`): the frozen encoder's activations feed a
   two-layer BiLSTM of `--lstm_units` per direction; the first row's
   encoder pass caches every row's features in `<cache_dir>/features`.

Each run's numbers (entity F1, precision, recall, F1 per type, wall and CPU
seconds) go to `<cache_dir>/summary.json`, which `experiments.conll_report`
turns into the results page. The fine-tuned runs keep their model, so the
run selected on valid.txt predicts a test file later:
`run_ner.py --do_predict --data_dir=<folder with test.txt> --output_dir=<its output>`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from core.atomic import write_atomically
from data_prep.datasets.conll import label_list, read_splits, write_conll_predictions
from evaluation.ner import entity_scores
from experiments import jobs

PEER = Path(__file__).resolve().parent / "peers" / "hf_ner_finetune.py"
TABLE7_ROWS = ("embeddings", "second_to_last", "last", "sum_last_four", "concat_last_four",
               "sum_all")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The settings both sides share; only compute-forced reductions differ from the paper's."""

    learning_rate: float = 5e-5
    num_train_epochs: float = 1.0
    train_batch_size: int = 32
    max_seq_length: int = 64
    warmup_proportion: float = 0.1
    adam_bias_correction: bool = False
    feature_learning_rate: float = 1e-3
    feature_epochs: int = 1
    lstm_units: int = 128


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ours_job(data: jobs.Dataset, model: jobs.Dataset, recipe: Recipe, seed: int,
             feature_layers: str | None = None, feature_cache: Path | None = None) -> jobs.Job:
    """`run_ner.py` on valid.txt: fine-tuning, or (with `feature_layers`) a Table 7 row.

    The rows share `feature_cache`, where the first row's encoder pass caches every row's
    features.
    """
    settings = {"do_train": True, "do_eval": True, "random_seed": seed,
                "max_seq_length": recipe.max_seq_length, "eval_batch_size": 64,
                "predict_batch_size": 64, "log_every": 20, "do_lower_case": True,
                "train_batch_size": recipe.train_batch_size}
    if feature_layers is None:
        settings.update(learning_rate=recipe.learning_rate,
                        num_train_epochs=recipe.num_train_epochs,
                        warmup_proportion=recipe.warmup_proportion,
                        adam_bias_correction=recipe.adam_bias_correction,
                        export_saved_model=False)
    else:
        settings.update(mode="feature_based", feature_layers=feature_layers,
                        learning_rate=recipe.feature_learning_rate,
                        num_train_epochs=recipe.feature_epochs, lstm_units=recipe.lstm_units,
                        feature_cache_dir=feature_cache, cache_all_feature_layers=True)
    return jobs.Job("run_ner.py", settings, {"data_dir": data, "init_checkpoint": model},
                    resumable=feature_layers is None, save_every=50,
                    # a feature run's cached activations (GBs) go once it has its scores
                    keep=None if feature_layers is None else ("*.txt", "*.tsv", "*.h5",
                                                              "*.json"))


def run_ours(job: jobs.Job, cache: jobs.Cache) -> dict:
    """The run's entity scores on valid.txt, running it first if it has no result."""
    timing = cache.folder(job) / "timing.json"
    # A stopped run resumed here was timed only from its resumption: its times are not recorded.
    resumed = cache.result(job) is None and (cache.folder(job) / "log.txt").is_file()
    cpu, started = child_cpu_seconds(), time.monotonic()
    result = jobs.run_job(job, cache, lambda arguments, log, environment: jobs.subprocess_runner(
        arguments, log, environment, niceness=19))
    if not timing.is_file():  # first collection: this process ran it
        write_atomically(timing, json.dumps(
            {"wall_seconds": math.nan, "cpu_seconds": math.nan} if resumed else
            {"wall_seconds": round(time.monotonic() - started),
             "cpu_seconds": round(child_cpu_seconds() - cpu)}))
    scores = result["eval_results"]
    return {"eval_f1": scores["eval_f1"], "eval_precision": scores["eval_precision"],
            "eval_recall": scores["eval_recall"], "folder": str(cache.output(job)),
            "per_type": {key[len("eval_f1_"):]: value for key, value in scores.items()
                         if key.startswith("eval_f1_")},
            **json.loads(timing.read_text(encoding="utf-8"))}


def peer_request(data_dir: str, model_dir: str, recipe: Recipe, seed: int) -> dict:
    sentences = read_splits(data_dir, ["train", "valid"])
    train = sentences["train"]
    return {"model_dir": model_dir, "do_lower_case": True, "seed": seed,
            "labels": label_list(train), "learning_rate": recipe.learning_rate,
            "epochs": recipe.num_train_epochs, "batch_size": recipe.train_batch_size,
            "max_seq_length": recipe.max_seq_length,
            "warmup_proportion": recipe.warmup_proportion,
            "bias_correction": recipe.adam_bias_correction,
            "train": {"words": [s.words for s in train], "tags": [s.tags for s in train]},
            "predict": {"valid": [s.words for s in sentences["valid"]]}}


def run_peer(data: jobs.Dataset, model: jobs.Dataset, recipe: Recipe, seed: int,
             cache: jobs.Cache, torch_python: str) -> dict:
    """Hugging Face PyTorch's run with the same recipe and seed, scored by our conlleval."""
    job = jobs.Job(f"peer:{PEER.name}", {**dataclasses.asdict(recipe), "seed": seed},
                   {"data_dir": data, "init_checkpoint": model})
    folder = cache.folder(job)
    if (folder / jobs.RESULT_FILE).is_file():
        return json.loads((folder / jobs.RESULT_FILE).read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    request = peer_request(data.value, model.value, recipe, seed)
    write_atomically(folder / "request.json", json.dumps(request))
    environment = dict(os.environ, HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE")
    cpu, started = child_cpu_seconds(), time.monotonic()
    command = ["nice", "-n", "19", torch_python, str(PEER), str(folder / "request.json"),
               str(folder / "answer.json")]
    print(f"$ {' '.join(command)}", flush=True)
    with open(folder / "log.txt", "w", encoding="utf-8") as log:
        if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=environment).returncode:
            raise jobs.JobFailed(f"the PyTorch peer failed; its log is {folder / 'log.txt'}")
    answer = json.loads((folder / "answer.json").read_text(encoding="utf-8"))
    valid = read_splits(data.value, ["valid"])["valid"]
    write_conll_predictions(folder / "valid_predictions.txt", valid, answer["tags"]["valid"])
    scores = entity_scores([s.tags for s in valid], answer["tags"]["valid"])
    result = {"eval_f1": scores["f1"], "eval_precision": scores["precision"],
              "eval_recall": scores["recall"], "folder": str(folder),
              "per_type": {kind: values["f1"] for kind, values in scores["per_type"].items()},
              "wall_seconds": round(time.monotonic() - started),
              "cpu_seconds": round(child_cpu_seconds() - cpu),
              "train_loss": answer["train_loss"], "diverged": answer.get("diverged", False)}
    write_atomically(folder / jobs.RESULT_FILE, json.dumps(result, indent=1))
    (folder / "request.json").unlink()  # the data's words: not kept beside the result
    return result


def queue(arguments: argparse.Namespace, recipe: Recipe):
    """(row, seed, thunk) in the order that informs first: a seed of each side, then Table 7."""
    cache = jobs.Cache(arguments.cache_dir)
    data = jobs.Dataset("conll2003", (Path(arguments.data_dir),))
    model = jobs.Dataset("model", (Path(arguments.init_checkpoint),))
    for index, seed in enumerate(arguments.seeds):
        if "fine_tune" in arguments.only:
            yield "fine_tune", seed, lambda s=seed: run_ours(ours_job(data, model, recipe, s),
                                                             cache)
        if "peer" in arguments.only:
            yield "pytorch", seed, lambda s=seed: run_peer(data, model, recipe, s, cache,
                                                           arguments.torch_python)
        if index == 0 and "features" in arguments.only:
            for layers in arguments.feature_layers:
                yield layers, seed, lambda s=seed, l=layers: run_ours(
                    ours_job(data, model, recipe, s, l, cache.root / "features"), cache)


def parse(argv: list[str]) -> tuple[argparse.Namespace, Recipe]:
    parser = argparse.ArgumentParser(prog="python -m experiments.conll", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="train.txt and valid.txt (CoNLL-2003).")
    parser.add_argument("--init_checkpoint", help="A BERT folder (default: the MiniLM).")
    parser.add_argument("--cache_dir", default=os.path.join(
        os.environ.get("BERT_CACHE_DIR", os.path.expanduser("~/.cache/bert_tf2")),
        "experiments", "conll"))
    parser.add_argument("--torch_python", default=str(jobs.REPOSITORY / ".venv-ref" / "bin"
                                                      / "python"))
    parser.add_argument("--seeds", default="1,2,3", type=lambda text: [
        int(seed) for seed in text.split(",")])
    parser.add_argument("--only", default="fine_tune,peer,features",
                        help="Which of fine_tune, peer, features to run.")
    parser.add_argument("--feature_layers", default=",".join(TABLE7_ROWS),
                        type=lambda text: text.split(","))
    for field in dataclasses.fields(Recipe):
        parser.add_argument(f"--{field.name}", default=field.default, type=type(field.default)
                            if field.type != "bool" else lambda text: text == "true")
    arguments = parser.parse_args(argv)
    unknown = set(arguments.only.split(",")) - {"fine_tune", "peer", "features"}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    if not os.path.isdir(arguments.data_dir):
        parser.error(f"--data_dir={arguments.data_dir}: no such folder")
    if arguments.init_checkpoint is None:
        from data_prep.corpora.assets import minilm_dir
        arguments.init_checkpoint = str(minilm_dir())
    recipe = Recipe(**{field.name: getattr(arguments, field.name)
                       for field in dataclasses.fields(Recipe)})
    return arguments, recipe


def record(path: Path, recipe: Recipe, row: str, seed: int, result: dict) -> None:
    """Adds one run to the summary, read afresh: queues of other `--only` parts share it."""
    summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"runs": {}}
    if summary.get("recipe", dataclasses.asdict(recipe)) != dataclasses.asdict(recipe):
        raise ValueError(f"{path} holds runs of another recipe ({summary['recipe']}); give "
                         "this one its own --cache_dir")
    summary["recipe"] = dataclasses.asdict(recipe)
    summary["runs"][f"{row}/{seed}"] = {"row": row, "seed": seed, **result}
    write_atomically(path, json.dumps(summary, indent=1, sort_keys=True) + "\n")


def main(argv: list[str]) -> None:
    arguments, recipe = parse(argv)
    for row, seed, thunk in queue(arguments, recipe):
        print(f"== {row}, seed {seed}", flush=True)
        result = thunk()
        record(Path(arguments.cache_dir) / "summary.json", recipe, row, seed, result)
        print(f"   valid entity F1 {100 * result['eval_f1']:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
