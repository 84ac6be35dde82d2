"""Training throughput side by side: ours against keras-hub, the Model Garden and Hugging Face.

Every system trains in its own process and environment on the same random
batch (numpy, seed 0), one CPU device, in float32 or (`--precision`) in each
system's own mixed bfloat16 (Keras and tf-keras policies, `torch.autocast`).
A worker builds its model, takes a few warm-up steps (tracing, XLA
compilation, allocator growth), then times rounds of a fixed number of steps
when asked, each after one untimed step; the driver interleaves the rounds
(A B C A B C ...) so that load from other work on the machine falls on every
system alike, and keeps each system's median round. One batch is trained on
over and over, so every system's loss must fall from its first
warm-up step to its last timed step: the driver asserts that, which shows the
step really trains. A worker that times 2048 x 2048 matmuls (TensorFlow) in the
same precision takes part in the rounds, and model FLOPs utilization (MFU) is
each system's model FLOPs per second over that rate.

Systems: ours (`run_pretraining.py`'s and `run_classifier.py`'s step:
`training.loop.TrainingLoop` with the original AdamW, in a process whose malloc
keeps freed heap pages as the runners' entry point has it, as by default,
which chooses XLA or not by `training.distribution.default_jit_compile`,
and with the other choice forced by `--jit_compile` / `--nojit_compile`);
keras-hub 0.32 `BertMaskedLM` / `BertTextClassifier` through `fit` with
Keras' AdamW; the Model Garden's `BertPretrainerV2` (tf-models-official
2.20 on tf-keras, read out of its wheel at run time) with a `tf.function`
step and tf-keras' AdamW; Hugging Face transformers `BertForPreTraining` /
`BertForSequenceClassification` on PyTorch 2.13 with `torch.optim.AdamW`
(in `.venv-ref`, with `OMP_WAIT_POLICY=PASSIVE` so that its idle threads do
not spin while the others run). Model FLOPs are those the task needs: the
encoder, the pooler and the heads, with the vocabulary projection at the 20
masked positions only (Hugging Face's `BertForPreTraining` projects all 128
positions, which its MFU does not credit) and the last block's queries and
feed-forward only where the heads read it (the peers compute every
position), times 3 for the backward pass.

    make bench   (or: .venv-bench/bin/python benchmarks/training_speed.py
                  [--cases=pretrain_small,...] [--rounds=N] [--precision=mixed_bfloat16])
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from benchmarks import harness  # noqa: E402
from core import extras  # noqa: E402

VOCAB, SEED, LEARNING_RATE, MATMUL_SIZE = 30522, 0, 1e-4, 2048
REF_PYTHON = ROOT / ".venv-ref" / "bin" / "python"
MODEL_GARDEN = ("tf-models-official", "2.20.0")

# name: model size, batch, timing plan. `steps` per round; `rounds` timed rounds; `warmup`
# untimed rounds (default 1). BERT-Base takes single steps, so it warms up for more of them:
# five steps were too few for the check that every loss falls (the Model Garden's once rose).
CASES = {
    "pretrain_small": dict(task="pretrain", layers=4, hidden=256, heads=4, intermediate=1024,
                           batch=32, length=128, predictions=20, steps=4, rounds=4),
    "pretrain_base": dict(task="pretrain", layers=12, hidden=768, heads=12, intermediate=3072,
                          batch=8, length=128, predictions=20, steps=1, rounds=3, warmup=4),
    "finetune_minilm_64": dict(task="classify", layers=6, hidden=384, heads=12,
                               intermediate=1536, batch=32, length=64, steps=4, rounds=4),
    "finetune_minilm_128": dict(task="classify", layers=6, hidden=384, heads=12,
                                intermediate=1536, batch=32, length=128, steps=3, rounds=3),
}
SYSTEMS = {
    "pretrain": ("ours", "ours_flipped", "keras_hub", "model_garden", "hf_torch"),
    "classify": ("ours", "ours_flipped", "keras_hub", "hf_torch"),
}
LABELS = {
    "keras_hub": "keras-hub fit", "model_garden": "Model Garden BertPretrainerV2",
    "hf_torch": "HF PyTorch", "matmul": "TF matmul 2048^2",
}
PRECISIONS = ("float32", "mixed_bfloat16")


def label(system: str, xla: dict[str, bool]) -> str:
    """A row's name; ours say whether XLA compiled their step (`xla`: system -> choice)."""
    if system == "ours":
        return f"ours (default: {'XLA' if xla[system] else 'no XLA'})"
    if system == "ours_flipped":
        return f"ours, --{'' if xla[system] else 'no'}jit_compile"
    return LABELS[system]


# ----------------------------------------------------------------------------- data and FLOPs

def batch_arrays(case: dict) -> dict:
    """The one random batch every system trains on (numpy only, identical in every process)."""
    import numpy as np

    generator = np.random.default_rng(SEED)
    batch, length = case["batch"], case["length"]
    arrays = {"input_ids": generator.integers(1, VOCAB, (batch, length)).astype(np.int32),
              "input_mask": np.ones((batch, length), np.int32),
              "segment_ids": np.repeat([[0] * (length // 2) + [1] * (length - length // 2)],
                                       batch, axis=0).astype(np.int32)}
    if case["task"] == "classify":
        arrays["label_ids"] = generator.integers(0, 2, batch).astype(np.int32)
        return arrays
    positions = np.stack([np.sort(generator.choice(np.arange(1, length), case["predictions"],
                                                   replace=False)) for _ in range(batch)])
    arrays.update(masked_lm_positions=positions.astype(np.int32),
                  masked_lm_ids=generator.integers(1, VOCAB, positions.shape).astype(np.int32),
                  masked_lm_weights=np.ones(positions.shape, np.float32),
                  next_sentence_labels=generator.integers(0, 2, (batch, 1)).astype(np.int32))
    return arrays


def step_flops(case: dict) -> float:
    """Model FLOPs of one training step: 3 x the forward matmuls the task needs.

    The heads read the last block only at [CLS] (and, in pre-training, the
    masked positions), so of the last block the task needs every position's
    keys and values but the rest only at those rows.
    """
    hidden, length, batch = case["hidden"], case["length"], case["batch"]
    intermediate = case["intermediate"]
    keys_values = 2 * 2 * hidden * hidden
    rest = 2 * (2 * hidden * hidden + 2 * hidden * intermediate) + 4 * length * hidden
    read_rows = 1 + (case["predictions"] if case["task"] == "pretrain" else 0)
    forward = batch * ((case["layers"] - 1) * length * (keys_values + rest)
                       + length * keys_values + read_rows * rest)
    forward += batch * 2 * hidden * hidden  # pooler
    if case["task"] == "pretrain":
        forward += batch * case["predictions"] * 2 * hidden * (hidden + VOCAB) + batch * 4 * hidden
    else:
        forward += batch * 4 * hidden
    return 3.0 * forward


# ----------------------------------------------------------------------------- workers

def _tf_worker_setup() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _ours_setup() -> None:
    """What every command's edge (`core.program.run_command`) does before TensorFlow starts."""
    from core.host_memory import keep_freed_heap_pages

    keep_freed_heap_pages()
    _tf_worker_setup()


def ours(case: dict, precision: str = "float32", jit_compile: bool | None = None):
    """`training.loop.TrainingLoop` on our model and loss, as the runners build it.

    `jit_compile=None` chooses XLA as the runners do without `--jit_compile`.
    """
    _ours_setup()
    import keras
    import tensorflow as tf

    from network.config import BertConfig
    from training.optimization import create_optimizer
    from training.distribution import default_jit_compile
    from training.loop import TrainingLoop

    config = BertConfig(vocab_size=VOCAB, hidden_size=case["hidden"],
                        num_hidden_layers=case["layers"], num_attention_heads=case["heads"],
                        intermediate_size=case["intermediate"])
    arrays = batch_arrays(case)
    data = tf.data.Dataset.from_tensors(arrays).repeat()
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.mixed_precision.set_dtype_policy(precision)
    if jit_compile is None:
        jit_compile = default_jit_compile(strategy, precision, case["hidden"])
    scratch = tempfile.TemporaryDirectory(prefix="training-speed-")  # removed at exit
    with strategy.scope():
        if case["task"] == "pretrain":
            from modeling.pretrainer import BertPretrainer
            model = BertPretrainer(config)
            loss_fn = model.pretraining_losses
        else:
            from modeling.classifier import BertClassifier
            from modeling.losses import classification_loss
            model = BertClassifier(config, num_labels=2)
            loss_fn = classification_loss
        optimizer = create_optimizer(LEARNING_RATE, 100_000, 0)
        trainer = TrainingLoop(model, optimizer, strategy, loss_fn, scratch.name,
                          jit_compile=jit_compile)
        trainer.restore_newest_checkpoint()  # none: the folder is new
    iterator = iter(strategy.experimental_distribute_dataset(data))
    logs = {}
    callbacks = [lambda step, values: logs.update(values)]

    def run(steps: int) -> float:
        trainer.train(_Reuse(iterator), trainer.step + steps, steps, callbacks)
        return logs["loss"]

    run.scratch = scratch
    run.xla = jit_compile
    return run


def ours_flipped(case: dict, precision: str):
    """Ours with the XLA choice the runners would not make by default."""
    _ours_setup()
    import tensorflow as tf

    from training.distribution import default_jit_compile

    default = default_jit_compile(tf.distribute.OneDeviceStrategy("/cpu:0"), precision,
                                  case["hidden"])
    return ours(case, precision, not default)


class _Reuse:
    """A dataset stand-in whose `iter` keeps handing out one iterator, so rounds continue it."""

    def __init__(self, iterator):
        self.iterator = iterator

    def __iter__(self):
        return self.iterator


def keras_hub_system(case: dict, precision: str):
    """keras-hub's BertMaskedLM / BertTextClassifier through `fit`, its usual path.

    A round is timed from the start of its first batch to the end of its last,
    as a long `fit` would run them: the `fit` call around them sometimes ended
    a fixed 5.14 s after it began however fast its steps were (2.3 s more at
    these sizes; about one call in three), which a run of many steps per call
    does not pay per step.
    """
    _tf_worker_setup()
    import keras
    import tensorflow as tf
    with extras.needed("benchmarks"):
        import keras_hub

    keras.mixed_precision.set_dtype_policy(precision)
    arrays = batch_arrays(case)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=case["layers"], num_heads=case["heads"],
        hidden_dim=case["hidden"], intermediate_dim=case["intermediate"],
        max_sequence_length=512)
    inputs = {"token_ids": arrays["input_ids"], "padding_mask": arrays["input_mask"],
              "segment_ids": arrays["segment_ids"]}
    if case["task"] == "pretrain":
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
        inputs["mask_positions"] = arrays["masked_lm_positions"]
        data = (inputs, arrays["masked_lm_ids"], arrays["masked_lm_weights"])
    else:
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
        data = (inputs, arrays["label_ids"])
    model.compile(optimizer=keras.optimizers.AdamW(LEARNING_RATE),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    dataset = tf.data.Dataset.from_tensors(data).repeat()

    class StepClock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.end = time.perf_counter()

    def run(steps: int) -> tuple[float, float]:
        clock = StepClock()
        history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0,
                            callbacks=[clock])
        return history.history["loss"][-1], clock.end - clock.start

    return run


def model_garden(case: dict, precision: str):
    """The Model Garden's BertPretrainerV2 and a `tf.function` step, as its trainers run it."""
    _tf_worker_setup()
    folder = tempfile.TemporaryDirectory(prefix="model-garden-")  # removed at exit
    from data_prep.corpora import assets
    with zipfile.ZipFile(assets.fetch_package_archive(*MODEL_GARDEN)) as archive:
        archive.extractall(folder.name, [name for name in archive.namelist()
                                         if name.startswith("official/")])
    sys.path.insert(0, folder.name)
    import tensorflow as tf
    with extras.needed("benchmarks"):
        import tf_keras
    from official.nlp.modeling import layers, models, networks

    tf_keras.mixed_precision.set_global_policy(precision)
    arrays = batch_arrays(case)
    encoder = networks.BertEncoderV2(
        vocab_size=VOCAB, hidden_size=case["hidden"], num_layers=case["layers"],
        num_attention_heads=case["heads"], inner_dim=case["intermediate"],
        inner_activation=tf_keras.activations.gelu, max_sequence_length=512,
        type_vocab_size=2)
    model = models.BertPretrainerV2(
        encoder_network=encoder, mlm_activation=tf_keras.activations.gelu,
        classification_heads=[layers.ClassificationHead(
            inner_dim=case["hidden"], num_classes=2, name="next_sentence")])
    optimizer = tf_keras.optimizers.AdamW(LEARNING_RATE)
    features = {"input_word_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
                "input_type_ids": arrays["segment_ids"],
                "masked_lm_positions": arrays["masked_lm_positions"]}
    features = {key: tf.constant(value) for key, value in features.items()}
    mlm_ids, mlm_weights = tf.constant(arrays["masked_lm_ids"]), tf.constant(
        arrays["masked_lm_weights"])
    nsp_labels = tf.constant(arrays["next_sentence_labels"][:, 0])
    cross_entropy = tf_keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="none")

    @tf.function
    def train_steps(steps):
        loss = tf.constant(0.0)
        for _ in tf.range(steps):
            with tf.GradientTape() as tape:
                outputs = model(features, training=True)
                mlm = cross_entropy(mlm_ids, tf.cast(outputs["mlm_logits"], tf.float32))
                mlm = tf.reduce_sum(mlm * mlm_weights) / (tf.reduce_sum(mlm_weights) + 1e-5)
                nsp = tf.reduce_mean(cross_entropy(
                    nsp_labels, tf.cast(outputs["next_sentence"], tf.float32)))
                loss = mlm + nsp
            variables = model.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def run(steps: int) -> float:
        return float(train_steps(tf.constant(steps)))

    run.modules = folder
    return run


def hf_torch(case: dict, precision: str):
    """Hugging Face transformers' BERT on PyTorch with torch's AdamW, eager, its usual loop.

    Mixed bfloat16 is `torch.autocast` around the forward pass, as PyTorch advises.
    """
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(SEED)
    arrays = batch_arrays(case)
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=case["hidden"], num_hidden_layers=case["layers"],
        num_attention_heads=case["heads"], intermediate_size=case["intermediate"],
        max_position_embeddings=512, type_vocab_size=2)
    inputs = {"input_ids": torch.from_numpy(arrays["input_ids"].astype(np.int64)),
              "attention_mask": torch.from_numpy(arrays["input_mask"].astype(np.int64)),
              "token_type_ids": torch.from_numpy(arrays["segment_ids"].astype(np.int64))}
    if case["task"] == "pretrain":
        model = transformers.BertForPreTraining(config)
        labels = np.full(arrays["input_ids"].shape, -100, np.int64)
        np.put_along_axis(labels, arrays["masked_lm_positions"], arrays["masked_lm_ids"], 1)
        inputs.update(labels=torch.from_numpy(labels), next_sentence_label=torch.from_numpy(
            arrays["next_sentence_labels"][:, 0].astype(np.int64)))
    else:
        config.num_labels = 2
        model = transformers.BertForSequenceClassification(config)
        inputs["labels"] = torch.from_numpy(arrays["label_ids"].astype(np.int64))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)

    def run(steps: int) -> float:
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision != "float32"):
                loss = model(**inputs).loss
            loss.backward()
            optimizer.step()
        return float(loss.detach())

    return run


def matmul(case: dict, precision: str):
    """[2048, 2048] x [2048, 2048] in TensorFlow: the rate MFU is measured against.

    In float32, or in bfloat16 for the mixed policies (their products' precision).

    Returns the number of matmuls for `steps` so that a round lasts about as long as
    a training round; the driver turns its time into FLOP/s.
    """
    _tf_worker_setup()
    import tensorflow as tf

    dtype = tf.float32 if precision == "float32" else tf.bfloat16
    left = tf.cast(tf.random.stateless_normal([MATMUL_SIZE, MATMUL_SIZE], seed=[1, 2]), dtype)
    right = tf.cast(tf.random.stateless_normal([MATMUL_SIZE, MATMUL_SIZE], seed=[3, 4]), dtype)

    @tf.function
    def products(count):
        total = tf.zeros([MATMUL_SIZE, MATMUL_SIZE], dtype)
        for _ in tf.range(count):
            total += tf.matmul(left, right)
        return tf.reduce_sum(tf.cast(total, tf.float32))

    return lambda steps: float(products(tf.constant(steps)))


def serve(system: str, case_name: str, precision: str, warmup: int) -> None:
    """Worker loop: build, warm up, then answer each "steps" line with one timed round."""
    case = CASES[case_name]
    builders = {"ours": ours, "ours_flipped": ours_flipped, "keras_hub": keras_hub_system,
                "model_garden": model_garden, "hf_torch": hf_torch, "matmul": matmul}
    run = builders[system](case, precision)
    first = _timed(run, 1)[0]
    for _ in range(warmup):
        run(case["steps"])
    _answer({"ready": True, "first_loss": first, "xla": getattr(run, "xla", None)})
    for message in timed_rounds(run, sys.stdin):
        _answer(message)


def timed_rounds(run, requests: Iterable[str]) -> Iterator[dict]:
    """One round per requested step count, each timed after one untimed step.

    A process's first step after another's round runs slower, most after a
    round that allocated and freed a lot of memory (Hugging Face's): ours
    took 83.6 sequences/s in rounds alternating with it against 92.2 next to
    keras-hub's (91.7 against 95.3 with the untimed step). That step leaves
    most of the cost of switching processes out of every system's round;
    steady training does not pay it.
    """
    for request in requests:
        run(1)
        loss, seconds = _timed(run, int(request))
        yield {"seconds": seconds, "loss": loss}


def _timed(run, steps: int) -> tuple[float, float]:
    """(loss, seconds) of `steps` steps; a system that times its own steps returns both."""
    start = time.perf_counter()
    result = run(steps)
    if isinstance(result, tuple):
        return result
    return result, time.perf_counter() - start


def _answer(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- driver

class Worker(harness.WorkerProcess):
    """One system's process; `round(steps)` times one round in it."""

    def __init__(self, system: str, case_name: str, precision: str, warmup: int,
                 log_dir: Path):
        python = REF_PYTHON if system == "hf_torch" else Path(sys.executable)
        if not python.exists():
            raise OSError(f"{python} is missing: run `make .venv-ref/.installed` first")
        self.system = system
        super().__init__(system, [str(python), __file__, f"--worker={system}",
                                  f"--cases={case_name}", f"--precision={precision}",
                                  f"--warmup={warmup}"],
                         log_dir / f"{case_name}-{system}.log",
                         # The torch environment has not installed this project: the worker
                         # imports `benchmarks.harness` from this checkout.
                         dict(os.environ, OMP_WAIT_POLICY="PASSIVE",
                              PYTHONPATH=os.pathsep.join(
                                  filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))),
                         ROOT)

    def round(self, steps: int) -> dict:
        return self.request(str(steps))


def run_case(case_name: str, precision: str, rounds: int | None, log_dir: Path) -> dict:
    """All systems of one case, plus the matmul worker, in interleaved rounds."""
    case = CASES[case_name]
    rounds = rounds or case["rounds"]
    systems = SYSTEMS[case["task"]] + ("matmul",)
    print(f"{case_name}: {case}", flush=True)
    seconds = {system: [] for system in systems}
    losses, xla = {}, {}
    workers = {}
    try:
        # Built one after the other: building and compiling in parallel would slow each.
        for system in systems:
            workers[system] = Worker(system, case_name, precision, case.get("warmup", 1),
                                     log_dir)
            ready = workers[system].receive()
            losses[system] = [ready["first_loss"]]
            xla[system] = ready["xla"]
            print(f"  {system} ready, first loss {ready['first_loss']:.4f}", flush=True)
        matmul_count = 0
        for index in range(rounds):
            for system in systems:
                steps = case["steps"] if system != "matmul" else matmul_count or 8
                answer = workers[system].round(steps)
                if system == "matmul":
                    # About as long as the other systems' rounds, but at least 4 matmuls.
                    per_matmul = answer["seconds"] / steps
                    typical = harness.median([values[-1] for key, values in seconds.items()
                                              if key != "matmul" and values])
                    matmul_count = max(4, round(typical / per_matmul))
                    answer["seconds"] /= steps  # seconds per matmul
                seconds[system].append(answer["seconds"])
                losses[system].append(answer["loss"])
            print(f"  round {index + 1}/{rounds}: " + ", ".join(
                f"{system} {seconds[system][-1]:.3f}s" for system in systems), flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return {"seconds": seconds, "losses": losses, "xla": xla}


def report(measured: dict[str, dict], load: tuple[tuple[float, ...], tuple[float, ...]],
           precision: str = "float32") -> str:
    """The markdown results: per case, every system's rate, MFU, loss and ratios."""
    parts = [f"# Training throughput, {precision}", "", __doc__.split("\n\n")[1].strip(), "",
             __doc__.split("\n\n")[2].strip(), "", "## Machine", ""]
    info = harness.machine_info(["tensorflow", "keras", "keras-hub", "tf-keras"])
    info["torch (in .venv-ref)"] = _ref_version("torch")
    info["transformers (in .venv-ref)"] = _ref_version("transformers")
    info["load average (1, 5, 15 min) before"] = ", ".join(f"{value:.2f}" for value in load[0])
    info["load average (1, 5, 15 min) after"] = ", ".join(f"{value:.2f}" for value in load[1])
    parts += [f"- {key}: {value}" for key, value in info.items()]
    for case_name, result in measured.items():
        case = CASES[case_name]
        flops = step_flops(case)
        matmul_rate = 2 * MATMUL_SIZE ** 3 / harness.median(result["seconds"]["matmul"])
        size = f"L{case['layers']}/H{case['hidden']}/A{case['heads']}"
        what = ("pre-training (MLM + NSP, 20 masked positions)" if case["task"] == "pretrain"
                else "fine-tuning, 2-class classifier")
        parts += ["", f"## {case_name}: {what}, {size}, batch {case['batch']} x {case['length']}",
                  "", f"{len(result['seconds']['matmul'])} interleaved rounds of "
                  f"{case['steps']} steps; model FLOPs per step {flops / 1e9:.1f} G; "
                  f"{precision} matmul {matmul_rate / 1e9:.0f} GFLOP/s in the same rounds.",
                  ""]
        rows = []
        for system, values in result["seconds"].items():
            if system == "matmul":
                continue
            timings = harness.Result(label(system, result["xla"]), case["batch"] * case["steps"],
                                     tuple(values))
            rate = timings.throughput
            slowest, fastest = timings.throughput_range
            loss = result["losses"][system]
            mfu = rate / case["batch"] * flops / matmul_rate
            rows.append([timings.label, f"{rate:.1f}", f"{slowest:.1f} - {fastest:.1f}",
                         f"{mfu:.0%}", f"{loss[0]:.3f} -> {loss[-1]:.3f}" + ("" if loss[-1] < loss[0] else " (NOT falling)"),
                         ""])
        default = float(rows[0][1])  # ours, as the runners run it by default, comes first
        for row in rows[1:]:
            row[5] = f"{default / float(row[1]):.2f}x"
        rows[0][5] = "-"
        parts.append(harness.markdown_table(
            ["system", "sequences/s (median)", "range over rounds", "MFU",
             "loss, first step -> last", "ours (default) / it"], rows))
    return "\n".join(parts) + "\n"


def _ref_version(package: str) -> str:
    try:
        return subprocess.run([str(REF_PYTHON), "-c", f"from importlib import metadata; "
                               f"print(metadata.version('{package}'))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not installed"


def check_trained(measured: dict[str, dict]) -> None:
    """Every system's loss on the fixed batch fell from its first step to its last."""
    for case_name, result in measured.items():
        for system, losses in result["losses"].items():
            if system == "matmul":
                continue
            print(f"{case_name} {system}: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
            if not losses[-1] < losses[0]:
                raise RuntimeError(f"{case_name}: {system}'s loss did not fall "
                                   f"({losses[0]:.4f} -> {losses[-1]:.4f}): it does not train")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, from {', '.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=0, help="timed rounds (0: per case)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                        help="every system's compute precision")
    parser.add_argument("--name", help="results file stem (default: training_speed, "
                        "with _mixed_bfloat16 appended in that precision)")
    args = parser.parse_args()
    cases = [name for name in args.cases.split(",") if name]
    unknown = [name for name in cases if name not in CASES]
    if unknown or not cases:
        parser.error(f"--cases: unknown case(s) {', '.join(unknown) or '(none)'}; "
                     f"expected some of {', '.join(CASES)}")
    if args.worker:
        serve(args.worker, cases[0], args.precision, args.warmup)
        return
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="training-speed-logs-") as logs:
        measured = {name: run_case(name, args.precision, args.rounds, Path(logs))
                    for name in cases}
    name = args.name or "training_speed" + ("" if args.precision == "float32"
                                            else f"_{args.precision}")
    harness.write_report(name, report(measured, (load_before, os.getloadavg()), args.precision))
    check_trained(measured)  # after writing, so that a failing run's figures are kept


if __name__ == "__main__":
    main()
