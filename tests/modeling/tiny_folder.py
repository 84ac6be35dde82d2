"""A tiny model folder with a real vocabulary, for the raw-text tests."""

from pathlib import Path

import keras

from network.checkpoints import export_google_checkpoint
from network.config import BertConfig
from network.encoder import BertEncoder
from tests.fixtures import TINY_CONFIG, TestCase, write_tiny_config

WORDS = ["the", "a", "film", "fine", "dull", "great", "boring", "plot", "acting", "is", "was",
         "cat", "sat", "on", "mat", "john", "lives", "in", "paris", "what", "where", "who",
         "un", "##believ", "##able", "##s", ".", ",", "?", "!"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
VOCAB += [f"[unused{index}]" for index in range(TINY_CONFIG["vocab_size"] - len(VOCAB))]


def tiny_folder(root: Path, name: str = "tiny") -> Path:
    """Google's layout: bert_config.json, vocab.txt (uncased) and a random encoder checkpoint."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    write_tiny_config(folder / "bert_config.json")
    export_google_checkpoint(BertEncoder(BertConfig.from_dict(TINY_CONFIG)),
                             folder / "bert_model.ckpt")
    return folder


class TinyFolderTestCase(TestCase):
    """A test class whose tests read one tiny model folder (`cls.folder`, under `cls.root`)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        keras.utils.set_random_seed(0)  # the same weights whichever tests ran before
        cls.folder = tiny_folder(cls.root)
