"""Sentence embeddings on STS-B: `BertTextEmbedder` beside sentence-transformers, same folder.

    python -m experiments.sts_embeddings --glue_dir=../shared/data/glue

embeds both sentences of every STS-B dev and test pair twice, with
`BertTextEmbedder.from_pretrained` (the folder's mean pooling and
normalization, as its sentence-transformers files say) and with
`SentenceTransformer(folder).encode` in the torch environment
(`experiments/peers/st_encode.py`, run by `--torch_python`), and scores both
the same way: the Spearman correlation between each pair's cosine similarity
and its gold score, the figure MTEB reports for STSBenchmark. The test split
of the GLUE download is unlabelled, so each pair's two cosines are written
to `paper_tasks_sts_test_scores.tsv` (GLUE's `index`, ours, theirs) for
whoever holds the labels. It writes `paper_tasks_sts.{json,md,png}` to
`--output_dir`, and with `--golden` the reference cosines of the first
`--golden_pairs` dev pairs, which `tests/experiments/test_sts_embeddings.py`
checks the embedder against.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from scipy.stats import spearmanr

from core.atomic import atomic_open, write_atomically
from data_prep.datasets.glue import get_processor
from experiments import provenance
from experiments.sts_report import render
from modeling.text_embedder import BertTextEmbedder

REPOSITORY = Path(__file__).resolve().parent.parent
PEER = Path(__file__).resolve().parent / "peers" / "st_encode.py"
MTEB_TEST_SPEARMAN = 0.8203  # MTEB's published STSBenchmark test score for all-MiniLM-L6-v2
GOLDEN = REPOSITORY / "tests" / "golden" / "minilm_stsb_dev_cosines.npz"
STEM = "paper_tasks_sts"


def read_pairs(glue_dir: str) -> dict[str, tuple[list[str], list[str], np.ndarray | None, list]]:
    """dev and test: (first sentences, second sentences, gold scores or None, GLUE indices)."""
    processor, folder = get_processor("sts-b"), os.path.join(glue_dir, "STS-B")
    splits = {"dev": processor.dev_sets(folder)["dev"],
              "test": processor.test_sets(folder)["STS-B"]}
    return {name: ([e.text_a for e in examples], [e.text_b for e in examples],
                   None if name == "test" else np.array([e.label for e in examples], float),
                   [e.guid for e in examples]) for name, examples in splits.items()}


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [N, D] arrays (float64)."""
    first, second = first.astype(np.float64), second.astype(np.float64)
    return (first * second).sum(-1) / (np.linalg.norm(first, axis=-1)
                                       * np.linalg.norm(second, axis=-1))


def ours(model_dir: str, sentences: list[str]) -> tuple[np.ndarray, int]:
    """Our vectors, and the window they were computed in.

    The embedder pads every row to its window (the folder's 256 tokens),
    sentence-transformers to the longest text of a batch; where every text
    fits in fewer tokens, a window of just that many gives the same vectors
    (padding never reaches them) at a fraction of the cost.
    """
    embedder = BertTextEmbedder.from_pretrained(model_dir)
    ids, _ = embedder.preprocessor.tokenizer.tokenize_batch(tf.constant(sentences))
    needed = int(ids.row_lengths().numpy().max()) + 2  # [CLS] and [SEP]
    if needed < embedder.preprocessor.sequence_length:
        embedder = BertTextEmbedder.from_pretrained(model_dir, sequence_length=needed)
    return embedder.predict(sentences, batch_size=64), embedder.preprocessor.sequence_length


def reference(model_dir: str, sentences: list[str], torch_python: str) -> np.ndarray:
    """sentence-transformers' vectors, computed in the torch environment."""
    with tempfile.TemporaryDirectory() as folder:
        request, answer = Path(folder) / "request.json", Path(folder) / "vectors.npy"
        request.write_text(json.dumps({"model_dir": model_dir, "sentences": sentences}))
        subprocess.run(["nice", "-n", "19", torch_python, str(PEER), str(request), str(answer)],
                       check=True, env=dict(os.environ, HF_HUB_OFFLINE="1",
                                            OMP_WAIT_POLICY="PASSIVE"))
        return np.load(answer)


def timed(function, *args) -> tuple[Any, tuple[float, float]]:
    """The function's answer, and (wall, CPU seconds) of this process and its children."""
    def cpu() -> float:
        return sum(getattr(resource.getrusage(who), field) for who in
                   (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for field in ("ru_utime", "ru_stime"))
    started, used = time.monotonic(), cpu()
    answer = function(*args)
    return answer, (time.monotonic() - started, cpu() - used)


def measure(glue_dir: str, model_dir: str, torch_python: str) -> tuple[dict, dict]:
    """Spearman of each side on dev, and both sides' cosines on every pair."""
    pairs = read_pairs(glue_dir)
    sentences = sorted({text for first, second, _, _ in pairs.values() for text in first + second})
    row = {text: index for index, text in enumerate(sentences)}
    vectors, seconds = {}, {}
    (vectors["ours"], window), seconds["BertTextEmbedder"] = timed(ours, model_dir, sentences)
    vectors["reference"], seconds["sentence-transformers"] = timed(reference, model_dir,
                                                                   sentences, torch_python)
    scores: dict = {"sentences": len(sentences), "seconds": seconds, "window": window}
    cosine = {}
    for split, (first, second, gold, guids) in pairs.items():
        for side, table in vectors.items():
            cosine[split, side] = cosines(table[[row[t] for t in first]],
                                          table[[row[t] for t in second]])
        scores[split] = {"pairs": len(first), "max_cosine_difference": float(
            np.abs(cosine[split, "ours"] - cosine[split, "reference"]).max())}
        if gold is not None:
            scores[split].update({side: float(spearmanr(cosine[split, side], gold).statistic)
                                  for side in vectors})
    return scores, {"cosine": cosine, "dev_gold": pairs["dev"][2], "test_guids": pairs["test"][3]}


def write_outputs(output_dir: Path, scores: dict, arrays: dict, golden_pairs: int | None) -> None:
    cosine = arrays["cosine"]
    with atomic_open(output_dir / f"{STEM}_test_scores.tsv", newline="\n") as writer:
        writer.write("index\tbert_text_embedder_cosine\tsentence_transformers_cosine\n")
        writer.writelines(f"{guid}\t{a:.6f}\t{b:.6f}\n" for guid, a, b in zip(
            arrays["test_guids"], cosine["test", "ours"], cosine["test", "reference"]))
    write_atomically(output_dir / f"{STEM}.json", json.dumps(scores, indent=1) + "\n")
    render(scores, cosine["dev", "ours"], cosine["dev", "reference"], output_dir, STEM)
    if golden_pairs:
        reference_cosines = cosine["dev", "reference"][:golden_pairs].astype(np.float32)
        spearman = spearmanr(reference_cosines, arrays["dev_gold"][:golden_pairs]).statistic
        np.savez_compressed(GOLDEN, cosines=reference_cosines, spearman=np.float64(spearman))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.sts_embeddings",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue_dir", required=True, help="The GLUE folder holding STS-B/.")
    parser.add_argument("--init_checkpoint", help="A sentence-transformers folder (default: "
                                                  "the MiniLM).")
    parser.add_argument("--torch_python", default=str(REPOSITORY / ".venv-ref" / "bin" / "python"))
    parser.add_argument("--output_dir", default=str(REPOSITORY / "experiments" / "results"))
    parser.add_argument("--golden_pairs", type=int, default=0,
                        help="Also record the reference cosines of this many dev pairs.")
    arguments = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(arguments.glue_dir, "STS-B")):
        parser.error(f"--glue_dir={arguments.glue_dir}: no STS-B folder in it")
    if arguments.golden_pairs < 0:
        parser.error(f"--golden_pairs={arguments.golden_pairs}: must be 0 or more")
    if arguments.init_checkpoint is None:
        from data_prep.corpora.assets import minilm_dir
        arguments.init_checkpoint = str(minilm_dir())
    scores, arrays = measure(arguments.glue_dir, arguments.init_checkpoint,
                             arguments.torch_python)
    folder = os.path.join(arguments.glue_dir, "STS-B")
    scores["data"] = {f"glue/STS-B/{name}": provenance.sha256(os.path.join(folder, name))
                      for name in ("dev.tsv", "test.tsv")}
    scores["machine"] = provenance.machine(arguments.torch_python)
    scores["machine"]["sentence-transformers (reference)"] = subprocess.run(
        [arguments.torch_python, "-c", "import sentence_transformers as s; print(s.__version__)"],
        capture_output=True, text=True, check=True).stdout.strip()
    # where this machine keeps the data and the torch environment is no part of the command
    scores["command"] = "python -m experiments.sts_embeddings " + " ".join(
        argument.replace(arguments.glue_dir, "$GLUE_DIR") for argument in argv
        if not argument.startswith("--torch_python"))
    scores["mteb_test_spearman"] = MTEB_TEST_SPEARMAN
    write_outputs(Path(arguments.output_dir), scores, arrays, arguments.golden_pairs)
    print(json.dumps({key: scores[key] for key in ("dev", "test")}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
