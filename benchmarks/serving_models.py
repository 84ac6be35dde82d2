"""The models `benchmarks/serving_speed.py` serves, built once and kept in the cache folder.

- MiniLM: the real pre-trained MiniLM L6/H384 (`data_prep.corpora.assets`).
- BERT-Base size: a Hugging Face folder with random weights (seed 0) at
  L12/H768/A12, written by `transformers` in the torch environment.
- ONNX Runtime's models: each Hugging Face folder exported with
  `torch.onnx.export`, fused by `onnxruntime.transformers.optimizer`
  (model type bert) and that fused graph quantized with
  `quantize_dynamic(..., QInt8)` (`benchmarks/serving_workers.py`).
- The sentiment classifiers: the real MiniLM fine-tuned on Pang & Lee's
  sentence polarity (3,000 / 1,000 split) by ours (`run_classifier.py`) and
  by Hugging Face PyTorch, with `benchmarks/sentiment_real_check.py`'s
  recipe and seed.
- The GLUE SST-2 classifier: the real MiniLM fine-tuned by ours on the first
  `SST2_EPOCHS` of an epoch of GLUE SST-2 (the user's copy, `--glue_dir`),
  same recipe otherwise; every served path and ONNX Runtime (on its Hugging
  Face export, `export_model.py --format=huggingface`) serve these weights.

Everything lands under `<cache>/serving_speed/` (`$BERT_CACHE_DIR`, default
`~/.cache/bert_tf2`), each folder written whole, so a rerun reuses it; a
folder's name carries what it depends on (the fine-tuning recipe).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import NamedTuple

from benchmarks import sentiment_real_check as recipe
from benchmarks.serving_workers import ONNX_FILES
from core.atomic import atomic_folder
from core.downloads import cache_dir
from data_prep.corpora import pang_lee_polarity
from data_prep.corpora.assets import minilm_dir

ROOT = Path(__file__).resolve().parents[1]
REF_PYTHON = ROOT / ".venv-ref" / "bin" / "python"
WORKERS = ROOT / "benchmarks" / "serving_workers.py"
OUR_WORKERS = ROOT / "benchmarks" / "serving_paths.py"  # every builder of ours, then the peers'


def recipe_name(epochs: float) -> str:
    """The fine-tuning recipe, for a cached folder's name."""
    return f"e{epochs:g}_lr{recipe.RATE:g}_b{recipe.BATCH}_l{recipe.LENGTH}_s{recipe.SEED}"


RECIPE = recipe_name(recipe.EPOCHS)
HF_ACCURACY_FILE = "dev_accuracy.json"
# A share of one epoch of SST-2's 67,349 training sentences (about 3,400): a usable classifier
# in minutes; the served paths are compared on the same weights, so its own accuracy matters less.
SST2_EPOCHS = 0.05


def folder() -> Path:
    return cache_dir() / "serving_speed"


def ref_python() -> Path:
    """The torch environment's interpreter; a clear error when it is missing."""
    if not REF_PYTHON.exists():
        raise OSError(f"{REF_PYTHON} is missing: run `make .venv-ref/.installed` first")
    return REF_PYTHON


def ref_environment() -> dict:
    """Idle OpenMP threads sleep instead of spinning while other systems run."""
    return dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")


def _prepare_in_ref(*arguments: str) -> None:
    subprocess.run([str(ref_python()), str(WORKERS), *arguments], check=True,
                   env=ref_environment(), cwd=ROOT)


def bert_base() -> Path:
    """The random-weight BERT-Base Hugging Face folder."""
    target = folder() / "bert_base_random"
    if not (target / "model.safetensors").is_file():
        print(f"writing {target}", flush=True)
        with atomic_folder(target) as staging:
            _prepare_in_ref("--prepare=base_folder", f"--output={staging}",
                            f"--vocab={minilm_dir() / 'vocab.txt'}")
    return target


def onnx_models(source: Path, name: str, kind: str = "encoder") -> Path:
    """The folder of `source`'s ONNX export, fused graph and int8 fused graph."""
    target = folder() / "onnx" / name
    if not (target / ONNX_FILES["fused_int8"]).is_file():
        print(f"exporting {source} to ONNX in {target}", flush=True)
        with atomic_folder(target) as staging:
            _prepare_in_ref("--prepare=onnx", f"--source={source}", f"--output={staging}",
                            f"--kind={kind}")
    return target


def dev_file() -> Path:
    return pang_lee_polarity.sst2_layout_dir() / "dev.tsv"


def finetuned_ours() -> Path:
    """Our fine-tuned MiniLM classifier (`run_classifier.py`'s output folder)."""
    target = folder() / f"ours_minilm_pang_lee_{RECIPE}"
    if not (target / "eval_results.txt").is_file():
        print(f"fine-tuning ours into {target}", flush=True)
        with atomic_folder(target) as staging:
            recipe.finetune_ours(minilm_dir(), pang_lee_polarity.sst2_layout_dir(),
                                 Path(staging))
    return target


def finetuned_sst2(glue_dir: Path) -> Path:
    """Our MiniLM fine-tuned on GLUE SST-2 (`run_classifier.py`'s output folder)."""
    target = folder() / f"ours_minilm_glue_sst2_{recipe_name(SST2_EPOCHS)}"
    if not (target / "eval_results.txt").is_file():
        print(f"fine-tuning ours on SST-2 into {target}", flush=True)
        with atomic_folder(target) as staging:
            recipe.finetune_ours(minilm_dir(), glue_dir / "SST-2", Path(staging),
                                 epochs=SST2_EPOCHS)
    return target


def finetuned_hf() -> Path:
    """Hugging Face PyTorch's fine-tuned MiniLM classifier (`save_pretrained` folder)."""
    target = folder() / f"hf_minilm_pang_lee_{RECIPE}"
    if not (target / HF_ACCURACY_FILE).is_file():
        print(f"fine-tuning Hugging Face PyTorch into {target}", flush=True)
        with atomic_folder(target) as staging:
            accuracy = recipe.pytorch(minilm_dir(), pang_lee_polarity.sst2_layout_dir(),
                                      Path(staging))
            (Path(staging) / HF_ACCURACY_FILE).write_text(
                json.dumps({"dev_accuracy": accuracy}), encoding="utf-8")
    return target


def huggingface_export(source: Path) -> Path:
    """`source` (our fine-tuned folder) in Hugging Face's layout, for the peers."""
    from export.model_exports import export_model

    target = folder() / "huggingface" / source.name
    if not (target / "config.json").is_file():
        print(f"exporting {source} to Hugging Face's layout in {target}", flush=True)
        export_model(str(source), str(target), "huggingface")
    return target


def _own_accuracy(ours: Path) -> float:
    values = dict(line.split(" = ", 1) for line in
                  (ours / "eval_results.txt").read_text().splitlines() if " = " in line)
    return float(values["eval_accuracy"])


def finetuned_accuracies(ours: Path, hf: Path) -> dict[str, float]:
    """The dev accuracies each fine-tuning reported itself (a check on the served ones)."""
    return {"ours": _own_accuracy(ours),
            "hf_torch": json.loads((hf / HF_ACCURACY_FILE).read_text())["dev_accuracy"]}


class TextModels(NamedTuple):
    """What the end-to-end part serves: our folder, the peers' folder and ONNX models, the
    dev set, each fine-tuning's own dev accuracy and who fine-tuned the peers' weights."""

    ours: Path
    peers: Path
    onnx: Path
    dev: Path
    reported: dict[str, float]
    peer_trainer: str


def text_models(glue_dir: Path | None) -> TextModels:
    """Pang & Lee's two fine-tunings (ours and Hugging Face PyTorch's); with `glue_dir`, our
    SST-2 fine-tuning, which the peers serve through its Hugging Face export."""
    if glue_dir is None:
        ours, peers = finetuned_ours(), finetuned_hf()
        return TextModels(ours, peers, onnx_models(peers, f"hf_minilm_pang_lee_{RECIPE}",
                                                   "classifier"),
                          dev_file(), finetuned_accuracies(ours, peers), "Hugging Face PyTorch")
    ours = finetuned_sst2(glue_dir)
    peers = huggingface_export(ours)
    accuracy = _own_accuracy(ours)
    return TextModels(ours, peers, onnx_models(peers, ours.name, "classifier"),
                      glue_dir / "SST-2" / "dev.tsv", {"ours": accuracy, "hf_torch": accuracy},
                      "ours (its Hugging Face export)")
