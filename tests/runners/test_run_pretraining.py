"""run_pretraining.py end to end: objectives, outputs, resume after SIGKILL, replicas, workers."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from evaluation.results import read_eval_results
from tests.fixtures import REPO, run_main, write_pretraining_records, write_tiny_config
from tests.training.test_input_pipeline import record_offsets

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(REPO, "run_pretraining.py")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pretraining")
    records = write_pretraining_records(folder / "train.tfrecord", 96)
    config = write_tiny_config(folder / "bert_config.json")
    return records, config


def _arguments(inputs, output_dir, **flags) -> dict:
    records, config = inputs
    arguments = {"input_file": records, "bert_config_file": config, "output_dir": output_dir,
                 "do_train": True, "do_eval": True, "train_batch_size": 8,
                 "max_seq_length": 32, "max_predictions_per_seq": 5, "num_train_steps": 6,
                 "num_warmup_steps": 2, "learning_rate": 1e-3, "save_checkpoints_steps": 2,
                 "log_every": 2, "max_eval_steps": 2}
    arguments.update(flags)
    return arguments


def _command(inputs, output_dir, **flags):
    arguments = _arguments(inputs, output_dir, **flags)
    return [sys.executable, SCRIPT] + [f"--{key}={value}" for key, value in arguments.items()]


def _run(inputs, output_dir, **flags):
    result = subprocess.run(_command(inputs, output_dir, **flags), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_train_eval_and_outputs(inputs, tmp_path):
    # What a run killed while writing its results or its export leaves behind.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    leftovers = [tmp_path / f".eval_results.txt.{child.pid}-0123abcd.partial",
                 tmp_path / "export" / f".bert_model.ckpt.{child.pid}-0123abcd.partial"]
    leftovers[1].mkdir(parents=True)
    leftovers[0].write_text("half")
    result = _run(inputs, tmp_path)
    assert not any(path.exists() for path in leftovers)
    results = read_eval_results(tmp_path / "eval_results.txt")
    assert set(results) >= {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                            "next_sentence_loss", "global_step", "perplexity"}
    assert results["global_step"] == 6
    assert re.search(r"step 6/6 .* steps/s .* examples/s .*loss=.* ETA", result.stderr)
    # A small model on one CPU in float32: XLA is the faster path, and the default.
    assert "Training step compiled with XLA: True" in result.stderr
    assert (tmp_path / "export" / "bert_model.ckpt.index").exists()
    assert json.loads((tmp_path / "bert_config.json").read_text())["hidden_size"] == 32
    assert any(name.startswith("events") for name in os.listdir(tmp_path / "logs" / "train"))

    from modeling.checkpoints import load_weights
    from modeling.config import BertConfig
    from modeling.pretrainer import BertPretrainer

    model = BertPretrainer(BertConfig.from_json_file(tmp_path / "bert_config.json"))
    report = load_weights(model, tmp_path / "export" / "bert_model.ckpt")
    assert not report.missing and not report.unexpected


@pytest.mark.parametrize("objective, key", [("mlm", "masked_lm_accuracy"),
                                            ("ltr", "lm_accuracy")])
def test_ablation_objectives(inputs, tmp_path, objective, key):
    records = inputs[0] if objective != "ltr" else write_pretraining_records(
        tmp_path / "unmasked.tfrecord", 96, masked=False)  # as --masked_lm_prob=0 writes them
    _run(inputs, tmp_path / "out", objective=objective, gradient_accumulation_steps=2,
         num_train_steps=3, input_file=records)
    results = read_eval_results(tmp_path / "out" / "eval_results.txt")
    assert key in results and "next_sentence_accuracy" not in results
    assert results["global_step"] == 3


@pytest.mark.parametrize("flags, compiled", [
    ({"dtype": "mixed_float16"}, False), ({"dtype": "mixed_bfloat16", "jit_compile": True}, True),
    ({"optimizer": "lamb", "iterations_per_loop": 3, "jit_compile": False}, False)])
def test_precisions_xla_and_lamb(inputs, tmp_path, flags, compiled):
    result = _run(inputs, tmp_path, num_train_steps=3, **flags)
    results = read_eval_results(tmp_path / "eval_results.txt")
    assert results["global_step"] == 3 and results["masked_lm_loss"] < 10
    assert f"Training step compiled with XLA: {compiled}" in result.stderr


def _newest_checkpoint_step(folder) -> int:
    steps = [int(match.group(1)) for path in folder.glob("ckpt-*.index")
             if (match := re.fullmatch(r"ckpt-(\d+)\.index", path.name))]
    return max(steps, default=0)


def test_resumes_after_sigkill(inputs, tmp_path):
    process = subprocess.Popen(_command(inputs, tmp_path, num_train_steps=400,
                                        save_checkpoints_steps=3, do_eval=False),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    # Any checkpoint from step 6 on: only the newest five are kept, so a given
    # one may come and go between two looks.
    while _newest_checkpoint_step(tmp_path) < 6:
        assert process.poll() is None, "training ended before it could be killed"
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "ckpt-400.index").exists()
    result = _run(inputs, tmp_path, num_train_steps=400, save_checkpoints_steps=100)
    assert re.search(r"Resuming from .*ckpt-\d+ at step [1-9]", result.stderr)
    assert read_eval_results(tmp_path / "eval_results.txt")["global_step"] == 400
    assert (tmp_path / "ckpt-400.index").exists()


def test_mirrored_over_two_cpu_replicas(inputs, tmp_path):
    _run(inputs, tmp_path, distribution_strategy="mirrored", cpu_replicas=2)
    assert read_eval_results(tmp_path / "eval_results.txt")["global_step"] == 6


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_workers_train_in_lockstep(inputs, tmp_path):
    workers = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    processes = []
    for index in range(2):
        environment = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen(
            _command(inputs, tmp_path, distribution_strategy="multi_worker_mirrored",
                     num_train_steps=4),
            env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    checksums = [re.search(r"final weights checksum: ([\d.]+)", output).group(1)
                 for output in outputs]
    assert checksums[0] == checksums[1]
    assert read_eval_results(tmp_path / "eval_results.txt")["global_step"] == 4
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".worker")]


@pytest.mark.parametrize("flags, message", [
    ({"input_file": "/nonexistent/*.tfrecord"}, "no input file matches"),
    ({"max_seq_length": 16}, "max_seq_length"),
    ({"train_batch_size": 6, "gradient_accumulation_steps": 4}, "not divisible"),
    ({"do_train": False, "do_eval": False}, "at least one of"),
    ({"output_dir": "/dev/null/out"}, "--output_dir=/dev/null/out: cannot write there"),
])
def test_bad_inputs(inputs, tmp_path, flags, message):
    flags = {"output_dir": tmp_path / "out", **flags}
    with pytest.raises((ValueError, OSError), match=re.escape(message)):
        run_main("run_pretraining.py", _arguments(inputs, **flags))


def test_truncated_records_are_named_before_training(inputs, tmp_path):
    records, config = inputs
    data = open(records, "rb").read()
    cut = tmp_path / "data" / "train-cut.tfrecord"
    cut.parent.mkdir()
    cut.write_bytes(data[:record_offsets(data)[48] + 20])  # 48 whole records, part of one
    (tmp_path / "data" / ".train-cut.tfrecord.complete.json").write_text("{}")  # skipped
    with pytest.raises(ValueError) as refused:
        run_main("run_pretraining.py",
                 _arguments((str(tmp_path / "data" / "*"), config), tmp_path / "out"))
    assert re.fullmatch(rf"{re.escape(str(cut))}: truncated record at byte \d+: it needs \d+ "
                        r"bytes, the file ends after \d+ .*", str(refused.value))
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


def test_a_damaged_record_met_in_training_is_named_with_its_offset(inputs, tmp_path):
    records, config = inputs
    data = bytearray(open(records, "rb").read())
    offset = record_offsets(bytes(data))[50]
    data[offset + 30] ^= 0xFF  # the framing stays intact: only reading finds it
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=re.escape(
            f"{damaged}: corrupted record at byte {offset} (its checksum does not match)")):
        run_main("run_pretraining.py", _arguments((damaged, config), tmp_path / "out"))


def test_records_with_ids_past_the_vocabulary_stop_the_run_naming_them(inputs, tmp_path):
    """Under XLA an out-of-range id would be clamped to the table's last row, silently."""
    records, _ = inputs
    small = write_tiny_config(tmp_path / "small_config.json", vocab_size=40)  # records: up to 63
    with pytest.raises(ValueError) as refused:
        run_main("run_pretraining.py", _arguments((records, small), tmp_path / "out"))
    assert re.fullmatch(rf"{re.escape(str(records))}: a record holds token id "
                        rf"(4\d|5\d|6[0-3]), outside the vocabulary of "
                        rf"{re.escape(str(small))} \(vocab_size=40\); .*", str(refused.value))
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


def test_a_vocabulary_larger_than_the_config_is_refused(inputs, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"token{i}" for i in range(60)]) + "\n")
    with pytest.raises(ValueError, match=re.escape(
            f"{vocab} holds 65 tokens, more than vocab_size=64 of {inputs[1]}")):
        run_main("run_pretraining.py", _arguments(inputs, tmp_path / "out", vocab_file=vocab))
    assert not os.path.exists(tmp_path / "out" / "checkpoint")


def test_a_second_run_into_a_live_runs_folder_is_refused_and_the_first_finishes(inputs,
                                                                                 tmp_path):
    from absl import flags

    import run_pretraining
    from cli import runner_flags
    from core import run_folder

    first = subprocess.Popen(_command(inputs, tmp_path, num_train_steps=60, do_eval=False),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / run_folder.LOCK_NAME
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text()):
        assert first.poll() is None, "the first run ended before it held its folder"
        assert time.monotonic() < deadline, "the first run never locked its folder"
        time.sleep(0.05)
    values = flags.FlagValues()
    run_pretraining.define_flags(values)
    values(["run_pretraining.py", *_command(inputs, tmp_path)[2:]])
    files, run, *_ = run_pretraining.configs_from_flags(values)
    with pytest.raises(run_folder.FolderInUse,
                       match=f"^{tmp_path} is in use by another run \\(PID {first.pid} on "):
        runner_flags.start_run(values, run, "pretraining:mlm_nsp", files)
    assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]
    assert _newest_checkpoint_step(tmp_path) == 60
    assert json.loads((tmp_path / run_folder.OWNER_NAME).read_text())["task"] == \
        "pretraining:mlm_nsp"
