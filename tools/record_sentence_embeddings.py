"""Records sentence-transformers' own vectors for the real MiniLM, as a golden file.

The suite must not need PyTorch, so what sentence-transformers computes is
stored once in `tests/golden/minilm_sentence_embeddings.npz` and
`tests/modeling/test_text_embedder.py` compares `BertTextEmbedder` with it:

- `folder`: `SentenceTransformer(folder).encode(TEXTS)`, the folder's own
  modules (mean pooling, then Normalize, 256 tokens);
- `cls`, `max`, `mean_sqrt_len_tokens`: the folder's Transformer under a
  Pooling module of that one mode and no Normalize.

The texts mix lengths (so rows are padded in one batch), accents and a text
longer than the folder's 256-token window (cut there by both).

Run with an environment holding torch==2.13.0 (CPU) and sentence-transformers,
naming the MiniLM folder (`data_prep.corpora.assets.minilm_dir()` fetches it):

    HF_HUB_OFFLINE=1 python tools/record_sentence_embeddings.py MINILM_FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "minilm_sentence_embeddings.npz"
TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome",
    "Café prices rose 3.5% in Zürich, didn't they?",
    "ok",
    " ".join(["The committee met again on Tuesday to discuss the budget, and after a long "
              "and often heated debate it voted to postpone the decision."] * 12),
]
SINGLE_MODES = ("cls", "max", "mean_sqrt_len_tokens")


def main(folder: str) -> None:
    vectors = {"folder": SentenceTransformer(folder, device="cpu").encode(TEXTS)}
    for mode in SINGLE_MODES:
        transformer = Transformer(folder, max_seq_length=256)
        pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)
        model = SentenceTransformer(modules=[transformer, pooling], device="cpu")
        vectors[mode] = model.encode(TEXTS)
    np.savez_compressed(GOLDEN, texts=np.array(json.dumps(TEXTS)),
                        **{key: value.astype(np.float32) for key, value in vectors.items()})
    print(f"wrote {GOLDEN}: {', '.join(f'{key} {value.shape}' for key, value in vectors.items())}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} MINILM_FOLDER")
    main(sys.argv[1])
