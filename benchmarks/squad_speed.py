"""SQuAD throughput: feature creation and inference, in questions (examples) per second.

What `run_squad.py` spends outside training, on a fixed synthetic set in
the official JSON layout: 400 contexts of 60 to 480 words (so some need
several windows) drawn with a fixed seed from whole words of the
bert-base-uncased vocabulary, with sentence punctuation, and 5 questions
each whose answers are spans of their context. The settings are the
paper's: max_seq_length 384, doc_stride 128, max_query_length 64, n-best
20, max answer length 30, uncased.

Measured, each as the median of repeats after a warm-up call:
- reading: the JSON file -> whitespace-tokenized examples (training mode,
  so answer offsets are checked);
- features: examples -> WordPiece windows (`convert_examples_to_features`),
  training mode;
- model: span logits of every window of a fixed subset of 32 questions, a
  MiniLM-sized model (L6/H384/A12, random weights; speed does not depend on
  the values) called as the runner calls it, `predict_batch_size` 8 (its default);
- answers: those logits -> answer texts, n-best lists and null odds (v2.0),
  `compute_predictions`.
No peer system is run: these figures are for tracking our own speed.

    .venv/bin/python benchmarks/squad_speed.py
"""

from __future__ import annotations

import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.datasets.squad import read_squad_examples  # noqa: E402
from data_prep.datasets.squad_features import convert_examples_to_features  # noqa: E402
from data_prep.datasets.squad_features import features_to_arrays
from modeling.span_model import BertSpanModel  # noqa: E402
from network.config import BertConfig  # noqa: E402
from tasks.batch_prediction import predict  # noqa: E402
from tasks.squad_predictions import RawResult  # noqa: E402
from tasks.squad_predictions import compute_predictions
from text.tokenization import FullTokenizer  # noqa: E402

CONTEXTS, QUESTIONS_PER_CONTEXT, INFERENCE_QUESTIONS = 400, 5, 32
MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 384, 128, 64
N_BEST_SIZE, MAX_ANSWER_LENGTH, PREDICT_BATCH = 20, 30, 8


def synthetic_squad(words: list[str], seed: int = 0) -> dict:
    """A SQuAD 2.0-layout dataset of random prose; every question answerable."""
    generator = np.random.default_rng(seed)
    paragraphs = []
    for context_index in range(CONTEXTS):
        length = int(generator.integers(60, 481))
        chosen = [words[i] for i in generator.integers(0, len(words), length)]
        pieces = []
        for position, word in enumerate(chosen):
            sentence_start = position == 0 or pieces[-1].endswith(".")
            pieces.append(word.capitalize() if sentence_start else word)
            if generator.random() < 0.07:
                pieces[-1] += "." if generator.random() < 0.7 else ","
        context = " ".join(pieces)
        starts = np.cumsum([0] + [len(piece) + 1 for piece in pieces])
        qas = []
        for number in range(QUESTIONS_PER_CONTEXT):
            first = int(generator.integers(0, length - 4))
            last = first + int(generator.integers(0, 4))
            answer = " ".join(pieces[first:last + 1])
            question = " ".join(["what"] + [words[i] for i in generator.integers(
                0, len(words), int(generator.integers(4, 15)))]) + "?"
            qas.append({"id": f"c{context_index}q{number}", "question": question,
                        "is_impossible": False,
                        "answers": [{"text": answer, "answer_start": int(starts[first])}]})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0", "data": [{"title": "synthetic", "paragraphs": paragraphs}]}


def main() -> None:
    load_before = os.getloadavg()[0]
    model_dir = minilm_dir()
    vocab_file = str(model_dir / "vocab.txt")
    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    common = (tokenizer.inv_vocab[index] for index in range(2000, 12000))
    words = [token for token in common if token.isalpha() and len(token) > 2]
    questions = CONTEXTS * QUESTIONS_PER_CONTEXT
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "synthetic-v2.0.json")
        with open(path, "w", encoding="utf-8") as writer:
            json.dump(synthetic_squad(words), writer)
        print(f"{questions} questions on {CONTEXTS} contexts (questions/s)")
        results.append(harness.measure(
            "reading the JSON (training mode)",
            lambda: read_squad_examples(path, True, True), questions, repeats=5))
        examples, _ = read_squad_examples(path, True, True)

    def features():
        return convert_examples_to_features(examples, tokenizer, MAX_SEQ_LENGTH, DOC_STRIDE,
                                            MAX_QUERY_LENGTH, is_training=True)

    windows = len(features())
    results.append(harness.measure(f"features ({windows} windows)", features, questions,
                                   repeats=5))

    subset = examples[:INFERENCE_QUESTIONS]
    subset_features = convert_examples_to_features(subset, tokenizer, MAX_SEQ_LENGTH,
                                                   DOC_STRIDE, MAX_QUERY_LENGTH,
                                                   is_training=False)
    arrays = features_to_arrays(subset_features)
    config = BertConfig.from_json_file(model_dir / "config.json")
    model = BertSpanModel(config)
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(f"{len(subset)} questions in {len(subset_features)} windows (questions/s)")
    results.append(harness.measure(
        f"model, {len(subset_features)} windows of {MAX_SEQ_LENGTH}, batch {PREDICT_BATCH}",
        lambda: predict(model, arrays, PREDICT_BATCH), len(subset), repeats=3))
    outputs = predict(model, arrays, PREDICT_BATCH)
    raw = [RawResult(int(unique_id), start, end) for unique_id, start, end
           in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
    results.append(harness.measure(
        "answers (n-best, final text, null odds)",
        lambda: compute_predictions(subset, subset_features, raw, N_BEST_SIZE,
                                    MAX_ANSWER_LENGTH, True, True), len(subset), repeats=5))

    report = harness.render_report(
        "SQuAD feature creation and inference throughput",
        "\n\n".join(__doc__.split("\n\n")[1:3]),
        harness.machine_info(["tensorflow", "tensorflow-text", "keras"]), results, [],
        "questions", notes=[f"model: {config.num_hidden_layers} layers, hidden "
                            f"{config.hidden_size}, float32, on {device}",
                            f"1-minute load average {load_before:.1f} before, "
                            f"{os.getloadavg()[0]:.1f} after (other work on this machine "
                            "slows every figure)"])
    harness.write_report("squad", report)


if __name__ == "__main__":
    main()
