"""Tokenization throughput: our in-graph FullTokenizer against Hugging Face `tokenizers`.

Both tokenize the same real text (the built-in news and Wikipedia corpora)
with the same uncased vocabulary (MiniLM's, which is bert-base-uncased's),
in batches of 1024 lines, without special tokens. Ours produces the
original FullTokenizer's ids (tests/text/test_tokenization.py checks that
against recorded output of the original); the lines where the peer's ids
differ from ours are counted and reported, since a faster tokenizer that
gives other ids would not be a fair comparison. The peer's `encode_batch`
spreads a batch over every core; ours does when a thread per core calls
it (TensorFlow releases the GIL while its ops run), which is the figure
compared. Ours one batch at a time (one core) is given beside it.

    make bench            # or: .venv-bench/bin/python benchmarks/tokenization_speed.py
"""

from __future__ import annotations

import concurrent.futures
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from core import extras  # noqa: E402
from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.corpora.builtin_corpus import news_sample_path  # noqa: E402
from data_prep.corpora.builtin_corpus import wikipedia_sample_path
from text.text_files import read_utf8_lines  # noqa: E402
from text.tokenization import MAX_CHARS_PER_WORD, FullTokenizer  # noqa: E402

with extras.needed("benchmarks"):
    from tokenizers import BertWordPieceTokenizer

BATCH_LINES = 1024


def corpus_lines() -> list[str]:
    lines = []
    for path in (news_sample_path(), wikipedia_sample_path()):
        lines += [line for line in read_utf8_lines(path) if line.strip()]
    return lines


def main() -> None:
    vocab_file = str(minilm_dir() / "vocab.txt")
    lines = corpus_lines()
    batches = [lines[i:i + BATCH_LINES] for i in range(0, len(lines), BATCH_LINES)]
    encoded_batches = [tf.constant([line.encode("utf-8") for line in batch])
                       for batch in batches]

    ours = FullTokenizer(vocab_file, do_lower_case=True)
    our_ids = [row for batch in encoded_batches
               for row in ours.tokenize_batch(batch)[0].to_list()]
    tokens = sum(len(row) for row in our_ids)

    peer = BertWordPieceTokenizer(vocab_file, lowercase=True, strip_accents=True,
                                  clean_text=True, handle_chinese_chars=True,
                                  wordpieces_prefix="##")
    peer._tokenizer.model.max_input_chars_per_word = MAX_CHARS_PER_WORD
    peer_ids = [encoding.ids for batch in batches
                for encoding in peer.encode_batch(batch, add_special_tokens=False)]
    differing = sum(mine != theirs for mine, theirs in zip(our_ids, peer_ids))

    print(f"{len(lines)} lines, {tokens} tokens; timing (tokens/s)")
    sequential = harness.measure(
        "ours: FullTokenizer.tokenize_batch (tensorflow-text), one batch at a time",
        lambda: [ours.tokenize_batch(batch) for batch in encoded_batches], tokens)
    with concurrent.futures.ThreadPoolExecutor(harness.usable_cores()) as threads:
        ours_result = harness.measure(
            "ours: FullTokenizer.tokenize_batch (tensorflow-text), a thread per core",
            lambda: list(threads.map(ours.tokenize_batch, encoded_batches)), tokens)
    peer_result = harness.measure(
        "peer: tokenizers BertWordPieceTokenizer.encode_batch",
        lambda: [peer.encode_batch(batch, add_special_tokens=False) for batch in batches], tokens)
    comparison = harness.Comparison("uncased, real news + Wikipedia text", ours_result,
                                    peer_result, target=5.0)
    notes = [f"{len(lines)} lines, {tokens} tokens, batches of {BATCH_LINES} lines; the "
             "compared runs use every core they find.",
             f"lines where the peer's ids differ from ours (= the original's): {differing} of "
             f"{len(lines)}."]
    report = harness.render_report(
        "Tokenization throughput", __doc__.split("\n\n")[1],
        harness.machine_info(["tensorflow", "tensorflow-text", "tokenizers"]),
        [ours_result, sequential, peer_result], [comparison], "tokens", notes)
    harness.write_report("tokenization", report)


if __name__ == "__main__":
    main()
