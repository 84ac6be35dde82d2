"""sentence-transformers' own vectors for a list of sentences: the reference for the embedder.

Run by `experiments.sts_embeddings` in the torch environment (`.venv-ref`,
with sentence-transformers), never imported by the project: it reads a JSON
request {"model_dir", "sentences"} and writes the vectors of
`SentenceTransformer(model_dir).encode(sentences)` (the folder's own
modules: mean pooling, then Normalize) as one float32 .npy file.

    python st_encode.py REQUEST.json VECTORS.npy
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from sentence_transformers import SentenceTransformer


def main() -> None:
    request_path, vectors_path = sys.argv[1], sys.argv[2]
    with open(request_path, encoding="utf-8") as reader:
        request = json.load(reader)
    model = SentenceTransformer(request["model_dir"], device="cpu")
    vectors = model.encode(request["sentences"], batch_size=64).astype(np.float32)
    temporary = f"{vectors_path}.tmp-{os.getpid()}.npy"
    np.save(temporary, vectors)
    os.replace(temporary, vectors_path)


if __name__ == "__main__":
    main()
