"""`export_model`'s arguments, drawn valid and hostile (Hypothesis).

The property, for every call: it writes the export whole (the folder it
returns, stamped with its format) or it raises the library's own refusal (a
ValueError, TypeError or OSError naming the argument at fault, or the source
it could not read), never a TensorFlow error or a Python internals error;
a refused export leaves nothing: an output folder that was not there is
still not there, one that was is unchanged, and neither the source nor
anything beside it changed. An argument a format has no use for is refused,
not ignored. Exports are slow, so most draws are refused early; the draws
that succeed are the property's other half.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import tensorflow as tf
from hypothesis import event, example, given
from hypothesis import strategies as st

from core.export_folder import STAMP_NAME
from export.model_exports import FORMATS, export_model
from modeling import BertClassifier
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder
from tests.runners.test_flag_properties import _snapshot

ARGUMENTS = ("source", "output_dir", "format_name", "sequence_length", "do_lower_case",
             "quantize", "serving_version")
HOSTILE = [None, "", " ", 0, -1, 1.5, math.nan, math.inf, True, [], {}, b"bytes",
           "\u200b", "e\u0301", "x" * 300, 2**63]
# Sources and outputs by name; the test maps them to paths in its folders.
SOURCES = st.one_of(st.sampled_from(["model", "classifier.keras", "missing", "model/vocab.txt",
                                     "a_file"]), st.sampled_from(HOSTILE))
OUTPUTS = st.one_of(st.sampled_from(["new", "new/deeper", "empty", "occupied", "a_file",
                                     "a_file/child", "google_export", "model", "."]),
                    st.sampled_from(HOSTILE))
FORMAT_NAMES = st.one_of(st.sampled_from(FORMATS), st.sampled_from(
    ["GOOGLE", "onnx", "tf-hub", " google"]), st.sampled_from(HOSTILE))
LENGTHS = st.one_of(st.none(), st.integers(min_value=-2, max_value=70),
                    st.sampled_from(HOSTILE + ["16", 16.0]))
CASINGS = st.one_of(st.none(), st.booleans(), st.sampled_from(["yes", "false", 1, 0]))
QUANTIZE = st.one_of(st.none(), st.sampled_from(["int8", "INT8", "int4", "float16"]),
                     st.sampled_from(HOSTILE))
VERSIONS = st.one_of(st.just(1), st.integers(min_value=-2, max_value=3),
                     st.sampled_from(HOSTILE + ["1", 1.0]))


class ExportModelArgumentPropertiesTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fixtures = cls.class_folder()
        model = tiny_folder(cls.fixtures, "model")
        classifier = BertClassifier.from_pretrained(model, num_labels=2, sequence_length=16,
                                                    label_names=["neg", "pos"])
        classifier.save(cls.fixtures / "classifier.keras")
        (cls.fixtures / "a_file").write_text("a user's file\n")

    def _place(self, name, work: Path):
        """A drawn name as the path it stands for (fixtures for sources, `work` for outputs)."""
        if not isinstance(name, str) or name in HOSTILE or name in ("16",):
            return name
        if name in ("model", "classifier.keras", "model/vocab.txt", "a_file", "missing"):
            return self.fixtures / name
        return work / name

    def _work(self) -> Path:
        """The example's folder: an empty folder, one holding a user's file, a file, an export."""
        work = self.tmp_path()
        (work / "empty").mkdir()
        (work / "occupied").mkdir()
        (work / "occupied" / "notes.txt").write_text("keep me\n")
        (work / "a_file").write_text("a user's file\n")
        (work / "google_export").mkdir()
        (work / "google_export" / "vocab.txt").write_text("[PAD]\n")
        (work / "google_export" / STAMP_NAME).write_text(json.dumps(
            {"kind": "google", "files": ["vocab.txt"]}))
        return work

    @example(source="model", output_dir="new", format_name="google", sequence_length=None,
             do_lower_case=None, quantize=None, serving_version=1)
    @example(source="model", output_dir="new", format_name="google", sequence_length=16,
             do_lower_case=None, quantize=None, serving_version=1)
    @example(source="model", output_dir="new", format_name="huggingface", sequence_length=None,
             do_lower_case=None, quantize=None, serving_version=0)
    @example(source="\u200b", output_dir="new", format_name="google", sequence_length=None,
             do_lower_case=None, quantize=None, serving_version=1)
    @example(source="model", output_dir=0, format_name="google", sequence_length=None,
             do_lower_case=None, quantize=None, serving_version=1)
    @example(source="model", output_dir="new/deeper", format_name="google",
             sequence_length=None, do_lower_case=None, quantize=None, serving_version=1)
    @example(source="model", output_dir="new", format_name="saved_model", sequence_length=None,
             do_lower_case=None, quantize=None, serving_version=1)
    @given(source=SOURCES, output_dir=OUTPUTS, format_name=FORMAT_NAMES,
           sequence_length=LENGTHS, do_lower_case=CASINGS, quantize=QUANTIZE,
           serving_version=VERSIONS)
    def test_exports_whole_or_refuses_naming_the_argument(self, **drawn):
        work = self._work()
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(work)  # a relative output_dir lands in the example's folder
        arguments = {**drawn, "source": self._place(drawn["source"], work),
                     "output_dir": self._place(drawn["output_dir"], work)}
        output = arguments["output_dir"]
        fixtures_before, work_before = _snapshot(self.fixtures), _snapshot(work)
        try:
            path = export_model(**arguments)
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            event(f"refused: {type(error).__name__}")
            self.assertIsInstance(error, (ValueError, TypeError, OSError), repr(error))
            self.assertNotIsInstance(error, tf.errors.OpError)
            named = [*ARGUMENTS, *(form(arguments[name]) for name in ("source", "output_dir")
                                   for form in (str, repr))]
            self.assertTrue(any(name in str(error) for name in named if name), repr(error))
            self.assertEqual(_snapshot(work), work_before, f"refused ({error}) but wrote")
            self.assertEqual(_snapshot(self.fixtures), fixtures_before)
            return
        event(f"exported: {drawn['format_name']}")
        self.assertEqual(Path(path), Path(output))
        stamp = json.loads((Path(output) / STAMP_NAME).read_text())
        self.assertEqual(stamp["kind"], drawn["format_name"])
        self.assertEqual(_snapshot(self.fixtures), fixtures_before)
        # The folders it made on the way to a new output_dir hold only that output.
        made = set(Path(output).resolve().relative_to(work.resolve()).parents) if Path(
            output).resolve().is_relative_to(work.resolve()) else set()
        outside = {entry for entry in set(_snapshot(work)) | set(work_before)
                   if not (work / entry).resolve().is_relative_to(Path(output).resolve())
                   and not (Path(entry) in made and entry not in work_before)}
        self.assertEqual({entry: _snapshot(work).get(entry) for entry in outside},
                         {entry: work_before.get(entry) for entry in outside})


if __name__ == "__main__":
    tf.test.main()
