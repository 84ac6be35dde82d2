"""End-to-end demonstration on real pre-trained weights.

Fetches the real MiniLM BERT (a sentence-embedding model, L6/H384) into the
cache, runs `extract_features.py` on a few sentences exactly as a user would,
mean-pools the last layer over each sentence's tokens and prints the cosine
similarity of every pair. Paraphrases should score well above unrelated
sentences, which only happens if tokenizer, encoder and checkpoint loading are
all right.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from data_prep.assets import minilm_dir

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The stock market fell sharply after the announcement.",
    "Share prices dropped quickly once the news was released.",
    "A cat is sleeping on the warm windowsill.",
]


def sentence_embeddings(features_file: Path) -> np.ndarray:
    """Mean of the last layer over the real tokens ([CLS] and [SEP] included)."""
    vectors = []
    with features_file.open(encoding="utf-8") as reader:
        for line in reader:
            record = json.loads(line)
            layer = [token["layers"][0]["values"] for token in record["features"]]
            vectors.append(np.mean(np.array(layer), axis=0))
    vectors = np.stack(vectors)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    model = minilm_dir()
    print(f"Real pre-trained weights: {model}")
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        (work / "input.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
        command = [sys.executable, "extract_features.py",
                   f"--input_file={work / 'input.txt'}",
                   f"--output_file={work / 'features.jsonl'}",
                   f"--vocab_file={model / 'vocab.txt'}",
                   f"--bert_config_file={model / 'config.json'}",
                   f"--init_checkpoint={model}",
                   "--layers=-1", "--max_seq_length=64", "--do_lower_case=true"]
        print("$ " + " ".join(command))
        subprocess.run(command, check=True, cwd=Path(__file__).parent)
        embeddings = sentence_embeddings(work / "features.jsonl")

    similarity = embeddings @ embeddings.T
    print("\nCosine similarity of mean-pooled last-layer features:")
    for i, sentence in enumerate(SENTENCES):
        print(f"  [{i}] {sentence}")
    print("      " + "".join(f"{j:>7d}" for j in range(len(SENTENCES))))
    for i, row in enumerate(similarity):
        print(f"  [{i}] " + "".join(f"{value:7.3f}" for value in row))
    print("\nParaphrase pairs (0,1) and (2,3) should score far above the rest.")


if __name__ == "__main__":
    main()
