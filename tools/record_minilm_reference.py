"""Records what Hugging Face's PyTorch BERT computes, as golden files for the test suite.

The suite must not need PyTorch, so the reference numbers are computed once
here and stored under `tests/golden/`:

- `minilm_reference.npz` and `minilm_reference.json`: the real MiniLM
  checkpoint (see `data_prep.corpora.assets.minilm_dir`) run on a few sentences and
  pairs: Hugging Face's token ids, the hidden states after the embeddings, a middle block and the last block, the pooled
  output.
- `tiny_bert_pretraining/`: a randomly initialized `BertForPreTraining` with
  both pre-training heads (the real MiniLM has none), saved as safetensors,
  and `tiny_bert_pretraining.npz` with its masked-LM and next-sentence
  logits. It checks the head name map and which matrices are transposed.

Run with an environment holding torch==2.13.0 (CPU) and transformers:

    HF_HUB_OFFLINE=1 python tools/record_minilm_reference.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
from data_prep.corpora.assets import minilm_dir  # noqa: E402  (standard library only)

GOLDEN = REPO / "tests" / "golden"
MAX_LENGTH = 24
# Embedding output, a middle block, the last block: enough to locate a mismatch
# while keeping the golden file small.
RECORDED_LAYERS = (0, 3, 6)
# Single sentences and pairs; the last pair is long enough to be truncated.
TEXTS = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Café prices rose 3.5% in Zürich, didn't they?", None),
    ("BERT reads both directions at once.", "GPT reads left to right."),
    ("A man is playing a guitar.", "Someone plays an instrument on a stage in front of a "
                                   "large and very enthusiastic crowd of people."),
]
TINY_CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
                   hidden_act="gelu", layer_norm_eps=1e-12)


def record_minilm() -> None:
    folder = minilm_dir()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(folder))
    model = transformers.BertModel.from_pretrained(str(folder)).eval()
    firsts = [first for first, _ in TEXTS]
    seconds = [second for _, second in TEXTS]
    ids, types, masks = [], [], []
    for first, second in TEXTS:
        encoded = tokenizer(first, second, max_length=MAX_LENGTH, truncation="longest_first",
                            padding="max_length")
        ids.append(encoded["input_ids"])
        types.append(encoded["token_type_ids"])
        masks.append(encoded["attention_mask"])
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(types),
                        attention_mask=torch.tensor(masks), output_hidden_states=True)
    np.savez_compressed(
        GOLDEN / "minilm_reference.npz",
        input_ids=np.array(ids, np.int32), segment_ids=np.array(types, np.int32),
        input_mask=np.array(masks, np.int32),
        hidden_state_layers=np.array(RECORDED_LAYERS, np.int32),
        hidden_states=np.stack([outputs.hidden_states[k].numpy() for k in RECORDED_LAYERS]),
        pooled_output=outputs.pooler_output.numpy())
    (GOLDEN / "minilm_reference.json").write_text(json.dumps(
        {"max_length": MAX_LENGTH, "text_a": firsts, "text_b": seconds,
         "transformers": transformers.__version__, "torch": torch.__version__}, indent=1) + "\n")


def record_tiny_pretraining() -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(**TINY_CONFIG)
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():  # the default init leaves biases at zero: make them count
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0.0, 0.1)
    folder = GOLDEN / "tiny_bert_pretraining"
    model.save_pretrained(str(folder), safe_serialization=True)
    generator = np.random.default_rng(0)
    input_ids = generator.integers(1, TINY_CONFIG["vocab_size"], size=(3, 16)).astype(np.int32)
    segment_ids = np.zeros_like(input_ids)
    segment_ids[:, 9:] = 1
    input_mask = np.ones_like(input_ids)
    input_mask[1, 12:] = 0
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor(input_ids, dtype=torch.long),
                        token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
                        attention_mask=torch.tensor(input_mask, dtype=torch.long))
    np.savez_compressed(
        GOLDEN / "tiny_bert_pretraining.npz", input_ids=input_ids, segment_ids=segment_ids,
        input_mask=input_mask, prediction_logits=outputs.prediction_logits.numpy(),
        seq_relationship_logits=outputs.seq_relationship_logits.numpy())


if __name__ == "__main__":
    GOLDEN.mkdir(parents=True, exist_ok=True)
    record_minilm()
    record_tiny_pretraining()
    print(f"wrote golden files under {GOLDEN}")
