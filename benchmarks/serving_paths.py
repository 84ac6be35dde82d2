"""The TensorFlow family's served paths besides `load_encoder`, for `serving_workers.py`.

- The numeric SavedModel: the encoder (int8: quantized first) written as
  the product writes a model on ids (`export.numeric.save_numeric`),
  loaded back with `tf.saved_model.load` and called through its
  `serving_default` signature, as a Python server or TF Serving calls it;
  with `xla`, that signature inside `tf.function(jit_compile=True)`. An
  int8 numeric model holds the plain int8 product (`portable_tracing`),
  which only XLA runs fast, so it is timed under XLA only.
- LiteRT: the same numeric signature converted by the product
  (`export.tflite.tflite_model`); with `int8`, the product's
  `--quantize=int8`: LiteRT's own dynamic-range quantization (`Optimize.DEFAULT`:
  int8 weights, activations quantized per call). It runs in
  `ai_edge_litert.interpreter.Interpreter` on `THREADS` threads with its
  default XNNPACK delegate; the note counts XNNPACK's partitions of the
  graph (none: XNNPACK took nothing) and the process's threads.
- bfloat16: `load_encoder(dtype="mixed_bfloat16")`, only on a CPU with
  bfloat16 instructions (`avx512_bf16` or `amx_bf16`); elsewhere oneDNN
  emulates them and the system is reported unavailable.

End to end, LiteRT serves a fine-tuned classifier as one model on strings:
tensorflow-text's `FastBertTokenizer` (which has a TFLite kernel; its ids
are checked against ours where the accuracy is scored), packing written in
ops that have TFLite kernels, and the classifier at the longest row's length.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

try:  # run as our systems' worker script: its sibling, whichever checkout's model code runs
    import serving_workers
except ModuleNotFoundError:  # imported as part of the benchmarks package
    from benchmarks import serving_workers

ONNX_INPUTS, THREADS = serving_workers.ONNX_INPUTS, serving_workers.THREADS
Unavailable, _tensorflow = serving_workers.Unavailable, serving_workers._tensorflow

INPUT_NAMES = dict(zip(ONNX_INPUTS, ("input_ids", "input_mask", "segment_ids")))
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def check_bf16() -> None:
    """Unavailable unless the CPU computes bfloat16 itself."""
    from benchmarks import harness

    if not harness.cpu_flags() & set(BF16_FLAGS):
        raise Unavailable(f"this CPU has none of {', '.join(BF16_FLAGS)}: bfloat16 would be "
                          "emulated")


def _encoder(spec: dict):
    from modeling import load_encoder

    encoder = load_encoder(spec["folder"])
    note = serving_workers.quantize_int8(encoder) if spec.get("int8") else ""
    return encoder, note


@contextlib.contextmanager
def _scratch() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="serving-paths-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def saved_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """The numeric SavedModel of the encoder, loaded back; XLA around its signature if `xla`."""
    tf = _tensorflow()
    from export.numeric import save_numeric

    if spec.get("int8") and not spec.get("xla"):
        raise Unavailable("an int8 numeric SavedModel holds the plain int8 product: "
                          "timed under XLA only")
    encoder, note = _encoder(spec)
    with _scratch() as folder:
        save_numeric(encoder, folder)
        loaded = tf.saved_model.load(folder)  # owns the variables: kept while served
    signature = loaded.signatures["serving_default"]
    if spec.get("xla"):
        signature = tf.function(signature, jit_compile=True)

    def call(arrays: dict, loaded=loaded) -> None:
        outputs = signature(**{INPUT_NAMES[name]: tf.constant(arrays[name], tf.int32)
                               for name in ONNX_INPUTS})
        for output in outputs.values():
            output.numpy()

    return call, note


def litert_model(model, int8: bool) -> bytes:
    """`model`'s numeric signature as the product converts it; LiteRT's int8 if `int8`."""
    from export.numeric import NumericServing
    from export.tflite import tflite_model

    return tflite_model(NumericServing(model), "int8" if int8 else None)


def litert_runner(content: bytes, text_ops: bool = False) -> tuple[Callable[..., dict], str]:
    """The `serving_default` runner of a LiteRT interpreter on `THREADS` threads, and a note:
    XNNPACK's partitions and the threads the interpreter added, known after one call. With
    `text_ops`, tensorflow-text's TFLite kernels are registered in it."""
    from core import extras

    try:
        with extras.needed("benchmarks"):
            from ai_edge_litert.interpreter import Interpreter, InterpreterWithCustomOps
    except extras.MissingExtraError as error:
        raise Unavailable(str(error)) from error
    threads_before = len(os.listdir("/proc/self/task"))
    if text_ops:
        import tensorflow_text

        # LiteRT calls each registrar with its op resolver's address.
        registrars = [lambda resolver, add=add: add(resolver)
                      for add in tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS]
        interpreter = InterpreterWithCustomOps(model_content=content, num_threads=THREADS,
                                               custom_op_registerers=registrars)
    else:
        interpreter = Interpreter(model_content=content, num_threads=THREADS)
    runner = interpreter.get_signature_runner("serving_default")

    def note() -> str:
        partitions = sum(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details())
        added = len(os.listdir("/proc/self/task")) - threads_before
        if not partitions:
            raise Unavailable("XNNPACK took no part of the graph")
        return f"XNNPACK partitions: {partitions}; threads added: {added}"

    return runner, note


def litert_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """The encoder's numeric model in LiteRT (float32, or LiteRT's dynamic-range int8)."""
    import numpy as np

    _tensorflow()
    from modeling import load_encoder

    runner, note = litert_runner(litert_model(load_encoder(spec["folder"]), spec.get("int8")))

    def call(arrays: dict) -> None:
        runner(**{INPUT_NAMES[name]: np.asarray(arrays[name], np.int32)
                  for name in ONNX_INPUTS})

    call({name: np.ones((1, 8), np.int32) for name in ONNX_INPUTS})
    return call, note()


def bf16_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """`serving_workers.ours_encoder` in mixed bfloat16, where the CPU has bfloat16."""
    check_bf16()
    return serving_workers.ours_encoder(dict(spec, dtype="mixed_bfloat16"))


def fast_bert_packing(tokenizer, length: int) -> Callable:
    """strings [batch] -> the three ids [batch, longest row]: one text packed as
    `text.sentence_pairs.pack_ragged` packs it ([CLS] pieces [SEP], cut to `length`), but
    tokenized by tensorflow-text's `FastBertTokenizer`, which has a TFLite kernel."""
    import tensorflow as tf
    import tensorflow_text

    from text import tokenization

    fast = tensorflow_text.FastBertTokenizer(
        vocab=tokenization.load_vocab(tokenizer.vocab_file), token_out_type=tf.int32,
        suffix_indicator=tokenization.SUFFIX_INDICATOR, unknown_token=tokenization.UNK_TOKEN,
        max_bytes_per_word=tokenization.MAX_CHARS_PER_WORD * tokenization.MAX_BYTES_PER_CHAR,
        lower_case_nfd_strip_accents=tokenizer.do_lower_case)

    def pack(texts: tf.Tensor) -> dict[str, tf.Tensor]:
        # Only ops with TFLite kernels: no ragged concatenation or slicing.
        pieces = fast.tokenize(texts)
        counts = tf.cast(tf.minimum(pieces.row_lengths(), length - 2), tf.int32)
        body = pieces.to_tensor(0, shape=[None, length - 2])
        rows = tf.shape(body)[0]
        ids = tf.concat([tf.fill([rows, 1], tokenizer.cls_id), body,
                         tf.zeros([rows, 1], tf.int32)], axis=1)
        ids += tf.one_hot(counts + 1, length, dtype=tf.int32) * tokenizer.sep_id
        longest = tf.reduce_max(counts) + 2
        return {"input_ids": ids[:, :longest],
                "input_mask": tf.sequence_mask(counts + 2, longest, tf.int32),
                "segment_ids": tf.zeros_like(ids[:, :longest])}

    return pack


def litert_text_model(model, tokenizer, length: int, int8: bool) -> bytes:
    """One LiteRT model from strings to `logits`: `fast_bert_packing`, then the classifier."""
    import tensorflow as tf

    from core.framework import frozen_function

    pack = fast_bert_packing(tokenizer, length)
    texts = tf.TensorSpec([None], tf.string, name="text")
    serve = tf.function(lambda text: {"logits": model(pack(text), training=False)})
    frozen = frozen_function(serve.get_concrete_function(texts))
    holder = tf.Module()
    holder.serve = tf.function(lambda text: {"logits": frozen(text)[0]}).get_concrete_function(
        texts)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([holder.serve], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's tokenizer, registered when loaded
    if int8:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def litert_text(spec: dict) -> tuple[Callable[[list[str]], list[str]], str]:
    """The fine-tuned classifier as one LiteRT model on strings (`litert_text_model`)."""
    import numpy as np

    _tensorflow()
    from modeling import BertClassifier, load_labels, load_tokenizer

    folder = spec["folder"]
    model = BertClassifier.from_pretrained(folder)
    labels = load_labels(folder)
    runner, note = litert_runner(litert_text_model(model, load_tokenizer(folder),
                                                   spec["length"], spec.get("int8")),
                                 text_ops=True)

    def classify(texts: list[str]) -> list[str]:
        logits = runner(text=np.array([text.encode("utf-8") for text in texts], object))
        return [labels[index] for index in np.argmax(logits["logits"], axis=-1)]

    classify(["warm up"])
    return classify, note()


BUILDERS = {**serving_workers.BUILDERS, ("ours_bf16", "encoder"): bf16_encoder,
            ("ours_saved", "encoder"): saved_encoder, ("litert", "encoder"): litert_encoder,
            ("litert", "text"): litert_text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", required=True, help="JSON spec of the system to serve")
    serving_workers.serve(json.loads(parser.parse_args().worker), BUILDERS)


if __name__ == "__main__":
    main()
