"""One serving system of `benchmarks/serving_speed.py` in its own process, timed on request.

A worker builds its system (ours in this project's environment; ONNX
Runtime and Hugging Face PyTorch in the torch environment, `.venv-ref`),
warms it up, then answers one JSON line per request line on stdin:

- an encoder system (`kind` "encoder") times `calls` forward passes on the
  same random [batch, 128] token ids in every process, after one untimed
  call (the first call after another process's round pays for the switch);
- a text system (`kind` "text") classifies raw sentences one at a time, from
  the string to the label, and returns each call's latency; or scores the
  whole dev set (`op` "accuracy").

Every system runs on `THREADS` threads. The same file prepares the torch
environment's models (`--prepare`): a randomly initialized BERT-Base folder
and ONNX exports, fused and quantized, of a Hugging Face folder. Only the
standard library is imported at the top, so either environment can run it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

SEQUENCE_LENGTH = 128
BATCHES = (1, 32)
THREADS = 2
VOCAB = 30522
SEED = 0
# The ONNX files of an exported folder: the export, the fused graph, fused then int8.
ONNX_FILES = {"export": "model.onnx", "fused": "model_fused.onnx",
              "fused_int8": "model_fused_int8.onnx"}
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Unavailable(Exception):
    """The system cannot run in this build (e.g. int8 that quantizes nothing); says why."""


def encoder_inputs(batch: int) -> dict:
    """Token ids, mask and segments [batch, 128], int64, identical in every process."""
    import numpy as np

    generator = np.random.default_rng(SEED)
    half = SEQUENCE_LENGTH // 2
    return {"input_ids": generator.integers(1, VOCAB, (batch, SEQUENCE_LENGTH)),
            "attention_mask": np.ones((batch, SEQUENCE_LENGTH), np.int64),
            "token_type_ids": np.repeat([[0] * half + [1] * (SEQUENCE_LENGTH - half)], batch,
                                        axis=0).astype(np.int64)}


def read_dev_set(path: str) -> tuple[list[str], list[str]]:
    """Sentences and labels of an SST-2-layout `dev.tsv` (header, `sentence<TAB>label`)."""
    with open(path, encoding="utf-8") as reader:
        rows = [line.rstrip("\n").split("\t") for line in reader][1:]
    return [row[0] for row in rows], [row[1] for row in rows]


# ----------------------------------------------------------------------------- ours

def _tensorflow(inter_op: int = 1):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import tensorflow as tf

    # Two threads for the ops' own work and one to run the graph, as ONNX Runtime is set:
    # TensorFlow's default of one graph thread per core would run two ops at once.
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    return tf


def quantize_int8(model) -> str:
    """`model.quantize("int8")`, refused as Unavailable when no weight became int8."""
    model.quantize("int8")
    quantized = [weight for weight in model.weights if weight.dtype == "int8"]
    if not quantized:
        raise Unavailable("model.quantize('int8') left every weight in float32")
    return f"{len(quantized)} int8 weight tensors"


def is_checkout(folder: Path) -> bool:
    """Whether `folder` holds this project's code, whose encoder these workers can run: in
    `network/`, or in `modeling/` in a checkout from before the network had a package."""
    return any((folder / package / "encoder.py").is_file() for package in ("network", "modeling"))


def served_function(encoder, xla: bool = False):
    """`encoder` as one concrete function (ids, mask, segments) -> (sequence, pooled output).

    The function takes any batch and length and is traced as a server traces
    its graph (`fast_paths.serving`), where the checkout has that (a baseline
    checkout may predate it).
    """
    import tensorflow as tf

    try:
        from network.layers import fast_paths
    except ImportError:  # a checkout from before the network had a package of its own
        from modeling.layers import fast_paths

    ids = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[ids, ids, ids], jit_compile=xla)
    def forward(ids, mask, segments):
        outputs = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments},
                          training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    with getattr(fast_paths, "serving", contextlib.nullcontext)():
        return forward.get_concrete_function()


def ours_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """Our encoder from `folder` through `served_function` (XLA if `xla`), int8 if asked, in
    `dtype` if given, with `inter_op` threads running the graph (default 1)."""
    tf = _tensorflow(spec.get("inter_op", 1))
    from modeling import load_encoder

    encoder = load_encoder(spec["folder"], **({"dtype": spec["dtype"]} if "dtype" in spec else {}))
    note = quantize_int8(encoder) if spec.get("int8") else ""
    forward = served_function(encoder, spec.get("xla", False))

    def call(arrays: dict) -> None:
        for output in forward(*(tf.constant(arrays[name], tf.int32) for name in ONNX_INPUTS)):
            output.numpy()

    return call, note


def ours_text(spec: dict) -> tuple[Callable[[list[str]], list[str]], str]:
    """Our fine-tuned classifier exported as `run_classifier.py` exports it, loaded back.

    The SavedModel is written from the fine-tuned folder by this build's
    `export.serving.export_classifier` (the function behind `saved_model/`),
    so the timing is this build's graph; with `int8` the model is quantized
    first.
    """
    tf = _tensorflow()
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from modeling import BertClassifier, load_labels, load_tokenizer
    from export.serving import export_classifier

    folder = spec["folder"]
    model = BertClassifier.from_pretrained(folder)
    note = quantize_int8(model) if spec.get("int8") else ""
    scratch = tempfile.mkdtemp(prefix="serving-speed-")
    try:
        path = export_classifier(model, load_tokenizer(folder), spec["length"],
                                 load_labels(folder), pair=False,
                                 path=os.path.join(scratch, "saved_model"))
        serve = tf.saved_model.load(path).signatures["serving_default"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def classify(texts: list[str]) -> list[str]:
        labels = serve(text_a=tf.constant(texts))["label"].numpy()
        return [label.decode("utf-8") for label in labels]

    return classify, note


# ----------------------------------------------------------------------------- peers

def _ort_session(spec: dict):
    """A CPU session of the fused (int8: fused and quantized) graph on `THREADS` threads.

    With `spin` false its threads sleep as soon as they wait: spinning is
    faster on an idle machine, but on a busy one a spinning thread holds a
    core that the thread it waits for needs.
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning",
                                     "1" if spec.get("spin", True) else "0")
    path = Path(spec["onnx"]) / ONNX_FILES["fused_int8" if spec.get("int8") else "fused"]
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """ONNX Runtime on the fused (and, with `int8`, dynamically quantized) export."""
    session = _ort_session(spec)
    return (lambda arrays: session.run(None, arrays)), ""


def ort_text(spec: dict) -> tuple[Callable[[list[str]], list[str]], str]:
    """`tokenizers` (the fine-tuned folder's `tokenizer.json`, else the `tokenizers` model
    `BertTokenizerFast` builds from its `vocab.txt`) then ONNX Runtime, then argmax."""
    import numpy as np

    # This worker runs in the torch environment, where this project is not installed:
    # its own `core` is read from the checkout the script sits in.
    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from core import extras

    with extras.needed("benchmarks"):  # the torch environment installs it too
        import tokenizers

    session = _ort_session(spec)
    path = Path(spec["folder"]) / "tokenizer.json"
    if path.is_file():
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    else:
        import transformers

        tokenizer = transformers.BertTokenizerFast.from_pretrained(
            spec["folder"]).backend_tokenizer
    tokenizer.enable_truncation(spec["length"])
    tokenizer.enable_padding()  # to the longest in a batch; one sentence is not padded

    def classify(texts: list[str]) -> list[str]:
        encodings = tokenizer.encode_batch(texts)
        feed = {"input_ids": np.array([e.ids for e in encodings], np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], np.int64)}
        logits = session.run(None, feed)[0]
        return [str(index) for index in logits.argmax(-1)]

    return classify, ""


def _torch():
    import torch

    torch.set_num_threads(THREADS)
    return torch


def hf_encoder(spec: dict) -> tuple[Callable[[dict], None], str]:
    """Hugging Face's `BertModel` on PyTorch, eval mode, under `torch.inference_mode`."""
    torch = _torch()
    import transformers

    model = transformers.BertModel.from_pretrained(spec["folder"]).eval()

    def call(arrays: dict) -> None:
        with torch.inference_mode():
            model(**{name: torch.from_numpy(value) for name, value in arrays.items()})

    return call, f"attention: {model.config._attn_implementation}"


def hf_text(spec: dict) -> tuple[Callable[[list[str]], list[str]], str]:
    """`BertTokenizerFast` and `BertForSequenceClassification`, as the fine-tuning used them."""
    torch = _torch()
    import transformers

    tokenizer = transformers.BertTokenizerFast.from_pretrained(spec["folder"])
    model = transformers.BertForSequenceClassification.from_pretrained(spec["folder"]).eval()

    def classify(texts: list[str]) -> list[str]:
        inputs = tokenizer(texts, truncation=True, max_length=spec["length"], padding=True,
                           return_tensors="pt")
        with torch.inference_mode():
            logits = model(**inputs).logits
        return [str(index) for index in logits.argmax(-1).tolist()]

    return classify, ""


# Our other paths' builders are `benchmarks/serving_paths.py`'s, the script ours run as.
BUILDERS = {("ours", "encoder"): ours_encoder, ("ours", "text"): ours_text,
            ("ort", "encoder"): ort_encoder, ("ort", "text"): ort_text,
            ("hf_torch", "encoder"): hf_encoder, ("hf_torch", "text"): hf_text}
PEERS = ("ort", "hf_torch")


# ----------------------------------------------------------------------------- the loop

def encoder_answers(call: Callable[[dict], None], requests: Iterable[dict],
                    timer: Callable[[], float] = time.perf_counter,
                    cpu_timer: Callable[[], float] = time.process_time) -> Iterator[dict]:
    """Per request {"batch", "calls"}: one untimed call, then the seconds of `calls` calls,
    on the clock and in CPU time (every thread of the process)."""
    inputs = {}
    for request in requests:
        batch = request["batch"]
        arrays = inputs.setdefault(batch, encoder_inputs(batch))
        call(arrays)
        start, cpu_start = timer(), cpu_timer()
        for _ in range(request["calls"]):
            call(arrays)
        yield {"seconds": timer() - start, "cpu_seconds": cpu_timer() - cpu_start}


def text_answers(classify: Callable[[list[str]], list[str]], texts: list[str],
                 labels: list[str], requests: Iterable[dict],
                 timer: Callable[[], float] = time.perf_counter) -> Iterator[dict]:
    """Latency requests {"op": "latency", "start", "calls"} time one sentence per call,
    sentences `start`, `start + 1`, ... of the dev set; {"op": "accuracy"} scores it all."""
    for request in requests:
        if request["op"] == "accuracy":
            predicted = []
            for begin in range(0, len(texts), 64):
                predicted += classify(texts[begin:begin + 64])
            correct = sum(guess == label for guess, label in zip(predicted, labels))
            yield {"accuracy": correct / len(texts), "count": len(texts)}
            continue
        classify([texts[request["start"] % len(texts)]])  # untimed, as for the encoders
        seconds = []
        for index in range(request["start"], request["start"] + request["calls"]):
            start = timer()
            classify([texts[index % len(texts)]])
            seconds.append(timer() - start)
        yield {"seconds": seconds}


def warm_up(spec: dict, run: Callable) -> dict:
    """Compiles and fills caches; returns each batch's seconds per call (encoders)."""
    if spec["kind"] == "text":
        texts, _ = read_dev_set(spec["dev"])
        for text in texts[:5]:
            run([text])
        run(texts[:64])
        return {}
    per_call = {}
    for batch in BATCHES:
        arrays = encoder_inputs(batch)
        run(arrays)
        start = time.perf_counter()
        run(arrays)
        per_call[str(batch)] = time.perf_counter() - start
    return per_call


def serve(spec: dict, builders: dict | None = None) -> None:
    """Builds the system (`builders`, default BUILDERS), reports readiness, then answers
    requests until stdin closes.

    Our int8 systems depend on what this build's `quantize` does, so any
    failure to build or warm them up is reported as their unavailability.
    """
    try:
        run, note = (builders or BUILDERS)[spec["system"], spec["kind"]](spec)
        per_call = warm_up(spec, run)
    except Exception as error:
        if not isinstance(error, Unavailable) and not (spec["system"] not in PEERS
                                                       and spec.get("int8")):
            raise
        reason = str(error) if isinstance(error, Unavailable) else (
            f"int8 failed: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
        _answer({"available": False, "note": reason})
        return
    _answer({"available": True, "note": note, "per_call": per_call})
    requests = (json.loads(line) for line in sys.stdin)
    if spec["kind"] == "encoder":
        answers = encoder_answers(run, requests)
    else:
        texts, labels = read_dev_set(spec["dev"])
        answers = text_answers(run, texts, labels, requests)
    for answer in answers:
        _answer(answer)


def _answer(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- preparing

def write_base_folder(output: str, vocab: str) -> None:
    """A randomly initialized BERT-Base (L12/H768/A12) Hugging Face folder, seed 0."""
    torch = _torch()
    import transformers

    torch.manual_seed(SEED)
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512,
        type_vocab_size=2, layer_norm_eps=1e-12)
    transformers.BertModel(config).save_pretrained(output)
    shutil.copyfile(vocab, os.path.join(output, "vocab.txt"))


def write_onnx_models(source: str, output: str, kind: str) -> None:
    """The Hugging Face folder exported to ONNX, fused for BERT, and the fused graph in int8.

    The export traces `BertModel` (`kind` "encoder": sequence and pooled
    outputs) or `BertForSequenceClassification` ("classifier": logits) with
    eager attention, whose pattern the optimizer fuses; batch and sequence
    axes stay dynamic. A fusion that misses any layer's attention is an error,
    since ONNX Runtime's figures would then not be its best.
    """
    torch = _torch()
    import onnx
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    model_class = (transformers.BertModel if kind == "encoder"
                   else transformers.BertForSequenceClassification)
    model = model_class.from_pretrained(source, attn_implementation="eager").eval()
    names = ("last_hidden_state", "pooler_output") if kind == "encoder" else ("logits",)

    class Positional(torch.nn.Module):
        """The model with positional inputs and a tuple of outputs, as the exporter wants."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids)
            return tuple(getattr(outputs, name) for name in names)

    arrays = encoder_inputs(2)
    paths = {key: os.path.join(output, name) for key, name in ONNX_FILES.items()}
    dynamic = {name: {0: "batch", 1: "sequence"} for name in ONNX_INPUTS}
    dynamic.update({name: {0: "batch", 1: "sequence"} if name == "last_hidden_state"
                    else {0: "batch"} for name in names})
    torch.onnx.export(Positional(), tuple(torch.from_numpy(arrays[name]) for name in ONNX_INPUTS),
                      paths["export"], input_names=list(ONNX_INPUTS), output_names=list(names),
                      dynamic_axes=dynamic, opset_version=17, dynamo=False)
    fused = optimizer.optimize_model(paths["export"], model_type="bert",
                                     num_heads=model.config.num_attention_heads,
                                     hidden_size=model.config.hidden_size)
    counts = fused.get_fused_operator_statistics()
    if counts.get("Attention", 0) != model.config.num_hidden_layers:
        raise RuntimeError(f"ONNX Runtime fused {counts.get('Attention', 0)} of "
                           f"{model.config.num_hidden_layers} attention layers: {counts}")
    fused.save_model_to_file(paths["fused"])
    # The fused operators are outside ONNX's type inference; their outputs are float32.
    quantize_dynamic(paths["fused"], paths["fused_int8"], weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    with open(os.path.join(output, "fusion.json"), "w", encoding="utf-8") as writer:
        json.dump({key: value for key, value in counts.items() if value}, writer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help="JSON spec of the system to serve")
    parser.add_argument("--prepare", choices=("base_folder", "onnx"))
    parser.add_argument("--source", help="--prepare=onnx: the Hugging Face folder")
    parser.add_argument("--kind", choices=("encoder", "classifier"), default="encoder")
    parser.add_argument("--vocab", help="--prepare=base_folder: the vocab.txt to copy")
    parser.add_argument("--output", help="--prepare: the (empty) folder to fill")
    args = parser.parse_args()
    if args.worker:
        serve(json.loads(args.worker))
    elif args.prepare == "base_folder":
        write_base_folder(args.output, args.vocab)
    elif args.prepare == "onnx":
        write_onnx_models(args.source, args.output, args.kind)
    else:
        parser.error("give --worker or --prepare")


if __name__ == "__main__":
    main()
