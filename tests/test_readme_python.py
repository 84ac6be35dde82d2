"""The README's Python runs as written, on the tiny model in place of the released ones.

Its ```python blocks run in order, in one fresh interpreter and one empty
folder, as a reader pasting them into a session would: a later block may use
what an earlier one imported or saved. Every model name a block uses is
served from a download cache that holds the tiny test model under that
name, so the text itself is run unchanged. A block that needs real data is
listed in SKIPPED, by a string only it holds, with the reason; a listed
string that names no block, or several, fails the test, so the list cannot
go stale.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modeling import BertPretrainer, export_tf_hub, load_config
from network import presets
from network.checkpoints import export_google_checkpoint, export_huggingface
from network.encoder import BertEncoder
from tests.fixtures import REPO, TestCase, tiny_config, write_tiny_config
from tests.modeling.tiny_folder import VOCAB

README = REPO / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# A string only the skipped block holds -> why it cannot run here.
SKIPPED = {
    "from tasks import classification":
        "trains on GLUE's MRPC files (glue_data/MRPC), which a test cannot download",
    "path/to/all-MiniLM-L6-v2":
        "needs a sentence-transformers folder (modules.json, 1_Pooling/); "
        "tests/modeling/test_text_embedder.py covers the embedder",
    "sst2_serving/":
        "reads the TF Serving export of a fine-tuned SST-2 folder, which the bash block's "
        "export_model.py writes; tests/export/test_serving_folders.py covers it",
    "ner_serving/":
        "reads the TF Serving export of a fine-tuned tagger's folder, which export_model.py "
        "writes; tests/export/test_serving_preprocess.py covers it",
    "sst2_lite/":
        "reads the TFLite export of a fine-tuned SST-2 folder, which the bash block's "
        "export_model.py writes; tests/export/test_serving_folders.py covers it",
}
# Runs the blocks given as JSON [(line, source), ...] in one namespace; names the failing one.
_DRIVER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for line, source in json.loads(sys.stdin.read()):
    try:
        exec(compile(source, f"README.md, block at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"README.md: the block at line {line} failed")
    print(f"block at line {line}: ran", flush=True)
"""


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block of `text` as (the line of its fence, its source)."""
    return [(text.count("\n", 0, match.start()) + 1, match.group(1))
            for match in BLOCK.finditer(text)]


def model_names(source: str) -> set[str]:
    """The release names and Hugging Face ids a block loads by name."""
    quoted = set(re.findall(r"[\"']([\w./-]+)[\"']", source))
    return {name for name in quoted if name in presets.known_names()}


def one_block_folder(root: Path) -> Path:
    """The tiny model with one Transformer block, in Google's layout: every fit, export and
    load the README makes traces a smaller graph, and reads the same."""
    folder = root / "tiny"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    write_tiny_config(folder / "bert_config.json", num_hidden_layers=1)
    export_google_checkpoint(BertEncoder(tiny_config(num_hidden_layers=1)),
                             folder / "bert_model.ckpt")
    return folder


class ReadmePythonTest(TestCase):

    def test_the_blocks_are_found_and_every_skip_names_one(self):
        sources = [source for _, source in python_blocks(README.read_text())]
        self.assertGreaterEqual(len(sources), 5)
        for key in SKIPPED:
            self.assertLen([source for source in sources if key in source], 1,
                           f"{key!r} should name exactly one block of README.md")

    @pytest.mark.slow
    def test_every_block_runs_in_order_on_the_tiny_model(self):
        blocks = python_blocks(README.read_text())
        runnable = [(line, source) for line, source in blocks
                    if not any(key in source for key in SKIPPED)]
        work, cache = self.tmp_path(), self.tmp_path()
        tiny = one_block_folder(self.tmp_path())
        hugging_face = self.tmp_path()  # the same model in Hugging Face's layout
        export_huggingface(BertPretrainer.from_pretrained(tiny), hugging_face,
                           load_config(tiny))
        shutil.copy(tiny / "vocab.txt", hugging_face)
        for name in set().union(*(model_names(source) for _, source in runnable)):
            if name in presets.GOOGLE_RELEASES:
                shutil.copytree(tiny, cache / "models" / "google" / name)
            else:
                shutil.copytree(hugging_face, cache / "models" / "huggingface" /
                                presets.HF_SHORT_IDS.get(name, name))
        # What the README's `export_model.py --format=tf_hub` command line writes.
        export_tf_hub(tiny, work / "bert_hub", sequence_length=64)
        result = subprocess.run(
            [sys.executable, "-c", _DRIVER], input=json.dumps(runnable), cwd=work,
            capture_output=True, text=True, timeout=900,
            env={**os.environ, "BERT_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO),
                 "BERT_GOOGLE_MODELS_URL": "http://127.0.0.1:9/", "BERT_HF_URL":
                 "http://127.0.0.1:9/"})
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        self.assertEqual(result.stdout.count(": ran"), len(runnable), result.stdout)
