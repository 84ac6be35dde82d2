"""tasks.tagging reads its split files only when they share one layout."""

import os

import tensorflow as tf

from tasks import tagging
from text.tokenization import FullTokenizer

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "eu", "rejects", "german", "call", "."]
_FOUR = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"


class SplitLayoutTest(tf.test.TestCase):

    def _data(self, train: str, valid: str) -> str:
        folder = self.get_temp_dir()
        for name, text in (("train.txt", train), ("valid.txt", valid)):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as writer:
                writer.write(text)
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as writer:
            writer.write("\n".join(_VOCAB) + "\n")
        return folder

    def _read(self, folder: str):
        task = tagging.TaggingTask(folder, do_train=True, do_eval=True)
        tokenizer = FullTokenizer(os.path.join(folder, "vocab.txt"))
        return tagging.read_data(task, tokenizer, max_seq_length=16)

    def test_a_training_file_missing_a_column_is_the_one_blamed(self):
        folder = self._data(_FOUR.replace(" B-NP B-", " B-").replace(" B-VP O", " O"), _FOUR)
        train, valid = (os.path.join(folder, name) for name in ("train.txt", "valid.txt"))
        with self.assertRaisesRegex(ValueError, f"^{train}:3: 3 columns per token line where "
                                                f"{valid} has 4: is a column missing\\?"):
            self._read(folder)

    def test_a_training_file_with_chunk_tags_for_entities_is_refused(self):
        chunks = "EU NNP B-NP\nrejects VBZ B-VP\nGerman JJ B-NP\n"
        folder = self._data(chunks, _FOUR)
        with self.assertRaisesRegex(ValueError, f"^{os.path.join(folder, 'train.txt')}:1: the "
                                                "tag column .* holds chunk tags"):
            self._read(folder)

    def test_files_of_one_layout_are_read(self):
        data = self._read(self._data(_FOUR, _FOUR))
        self.assertAllEqual(data.labels, ["O", "B-MISC", "B-ORG"])
        self.assertAllEqual(sorted(data.splits), ["train", "valid"])


if __name__ == "__main__":
    tf.test.main()
