"""The GLUE readers on the head of each real file, where the shared data folder is at hand.

The real files carry what no synthetic fixture was made from: MRPC's byte-order
mark and unbalanced quotes, CoLA's headerless train and dev beside its headed
test, STS-B's float scores. Only the first rows of each file are read (copied
to a temporary folder); the data's terms keep every row out of the repository.
`BERT_SHARED_DATA` names the folder (default: `../shared/data` beside the
checkout), which holds `glue/<TASK>/{train,dev,test}.tsv`.
"""

import itertools
import os
from pathlib import Path

import pytest
from absl.testing import parameterized

from data_prep.datasets.glue import get_processor
from tests.fixtures import REPO, TestCase

pytestmark = pytest.mark.assets
SHARED = Path(os.environ.get("BERT_SHARED_DATA", REPO.parent / "shared" / "data"))
ROWS = 120  # lines read from the head of each file
HEADERLESS = {("CoLA", "train.tsv"), ("CoLA", "dev.tsv")}


class RealGlueFilesTest(TestCase, parameterized.TestCase):

    def head_folder(self, task: str) -> Path:
        """The first ROWS lines of the task's three files, in a temporary folder."""
        source = SHARED / "glue" / task
        if not source.is_dir():
            self.skipTest(f"{source} is absent: set BERT_SHARED_DATA to the folder holding "
                          "glue/<TASK>/ (GLUE download layout) to read the real files")
        target = self.tmp_path() / task
        target.mkdir()
        for name in ("train.tsv", "dev.tsv", "test.tsv"):
            with open(source / name, "rb") as reader:
                (target / name).write_bytes(b"".join(itertools.islice(reader, ROWS)))
        return target

    @parameterized.parameters("CoLA", "SST-2", "MRPC", "STS-B", "RTE", "WNLI")
    def test_every_row_of_the_head_is_read_with_its_label(self, task):
        folder = self.head_folder(task)
        processor = get_processor(task)
        with self.assertLogs(level="INFO") as logs:
            splits = {"train.tsv": processor.train_examples(str(folder)),
                      "dev.tsv": processor.dev_sets(str(folder))["dev"],
                      "test.tsv": next(iter(processor.test_sets(str(folder)).values()))}
        for name, examples in splits.items():
            lines = len((folder / name).read_bytes().splitlines())
            rows = lines if (task, name) in HEADERLESS else lines - 1
            self.assertEqual(len(examples), rows, f"{task}/{name}")
            self.assertIn(f"{name}: read {rows} examples, skipped 0 rows", "\n".join(logs.output))
            for example in examples:
                self.assertNotIn("\ufeff", example.text_a)
                self.assertTrue(example.text_a.strip(), f"{task}/{name} {example.guid}")
                self.assertEqual(example.text_b is None, task in ("CoLA", "SST-2"))
        for example in splits["train.tsv"] + splits["dev.tsv"]:
            if processor.is_regression:
                self.assertBetween(example.label, 0.0, 5.0)
            else:
                self.assertIn(example.label, processor.labels)
        # Test rows keep GLUE's own index, which a submission must repeat.
        self.assertEqual([e.guid for e in splits["test.tsv"][:3]], ["0", "1", "2"])

    def test_mrpc_quotes_stay_inside_their_row(self):
        folder = self.head_folder("MRPC")
        examples = get_processor("MRPC").train_examples(str(folder))
        quoted = [e for e in examples if '"' in e.text_a + e.text_b]
        self.assertNotEmpty(quoted, "the head of MRPC's train.tsv has quotes to check")
        for example in quoted:
            self.assertNotIn("\n", example.text_a + example.text_b)
            self.assertNotIn("\t", example.text_a + example.text_b)
