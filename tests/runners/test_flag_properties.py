"""Every runner's flags, drawn from their declarations, through its `main` in this process.

The property, for every command line: the runner gets past all its checks
and reaches the start of its work (where the test stops it: the first model
it would build), or it ends as its program edge ends a refused run, with
exit status 1 and one line `prog: error: ...` naming the flag (or the file
a flag named); a bad word absl cannot parse is refused by absl, naming the
flag. Never a traceback (an error the edge does not turn into one line), a
Python internals error or a TensorFlow error; on a refusal nothing changed
on disk (a folder that existed keeps at most the stamp and lock of a claim),
and a run that started changed nothing outside the outputs its flags name.

Each example runs in its own copy of tiny fixtures (a model folder, SST-2,
CoNLL and SQuAD files, pre-training records), as the current directory, so
relative paths land there too. The runners read the flags from a fresh
`FlagValues` (`tests.fixtures.run_main`), and the strategy is the default
one: making another (logical CPUs, a precision policy) changes this
process for good, and those flags are checked before it is made.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import tensorflow as tf
from absl import flags
from hypothesis import event, example, given

from core import faults, program, run_folder
from tests.cli.flag_strategies import flag_arguments
from tests.fixtures import TestCase, write_pretraining_records
from tests.modeling.property_strategies import budget
from tests.modeling.tiny_folder import tiny_folder
from text.tokenization import FullTokenizer

# Where each runner's work begins, once its flags, its files and its folder are checked.
WORK_STARTS = {"run_pretraining": "tasks.pretraining.BertPretrainer",
               "run_classifier": "tasks.driver.TaskHooks.pretrained",
               "run_squad": "tasks.driver.TaskHooks.pretrained",
               "run_ner": "tasks.driver.TaskHooks.pretrained",
               "extract_features": "tasks.features.BertEncoder",
               "export_model": "export_model.export_model"}
# The flags that name what a run writes: a run that starts may change what is under them.
OUTPUT_FLAGS = ("output_dir", "output_file", "feature_cache_dir")
MODEL = ["--bert_config_file=model/bert_config.json", "--vocab_file=model/vocab.txt"]
FINE_TUNING = [*MODEL, "--init_checkpoint=model/bert_model.ckpt", "--output_dir=out",
               "--do_train", "--do_eval", "--do_predict", "--max_seq_length=16",
               "--train_batch_size=4", "--num_train_epochs=1"]
# A command line of each runner that starts its work: the drawn words come after it.
BASE = {
    "run_pretraining": ["--input_file=records/train.tfrecord", "--output_dir=out",
                        "--bert_config_file=model/bert_config.json", "--do_train",
                        "--max_seq_length=32", "--max_predictions_per_seq=5",
                        "--train_batch_size=4", "--num_train_steps=2"],
    "run_classifier": ["--task_name=SST-2", "--data_dir=SST-2", *FINE_TUNING],
    "run_squad": ["--train_file=squad.json", "--predict_file=squad.json", "--doc_stride=8",
                  "--max_query_length=8", *FINE_TUNING],
    "run_ner": ["--data_dir=conll", *FINE_TUNING],
    "extract_features": ["--input_file=texts.txt", "--output_file=features/out.jsonl",
                         "--init_checkpoint=model/bert_model.ckpt", "--layers=-1,0",
                         "--max_seq_length=16", *MODEL],
    "export_model": ["--source=model", "--format=google", "--output_dir=out"],
}
# Places a string flag may name, relative to the example's folder: fixtures, outputs, traps.
PATHS = ["out", "new/deeper/out", "empty", "a_file", "a_file/child", "stamped", "model",
         "model/bert_model.ckpt", "model/vocab.txt", "SST-2", "SST-2/train.tsv", "conll",
         "squad.json", "records/train.tfrecord", "records/*.tfrecord", "texts.txt",
         "missing/file", "missing*"]
SENTENCES = [("the film is great", 1), ("a fine film", 1), ("great acting", 1),
             ("the plot is dull", 0), ("a boring film", 0), ("dull acting", 0)]


class _WorkStarted(BaseException):
    """Raised where the runner's work begins (a BaseException, which no edge turns into a line)."""


def _write_fixtures(root: Path) -> None:
    """The tiny files every runner reads, under `root`, with relative names (see PATHS)."""
    tiny_folder(root, "model")
    (root / "SST-2").mkdir()
    rows = "".join(f"{text}\t{label}\n" for text, label in SENTENCES)
    (root / "SST-2" / "train.tsv").write_text("sentence\tlabel\n" + rows * 2)
    (root / "SST-2" / "dev.tsv").write_text("sentence\tlabel\n" + rows)
    (root / "SST-2" / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{index}\t{text}\n" for index, (text, _) in enumerate(SENTENCES)))
    (root / "conll").mkdir()
    sentence = "John NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n"
    for name in ("train.txt", "valid.txt", "test.txt"):
        (root / "conll" / name).write_text("-DOCSTART- -X- -X- O\n\n" + (sentence + "\n") * 3)
    context = "john lives in paris . the cat sat on the mat ."
    qas = [{"id": f"q{index}", "question": question,
            "answers": [{"text": answer, "answer_start": context.index(answer)}]}
           for index, (question, answer) in enumerate([("where lives john ?", "paris"),
                                                       ("who sat on the mat ?", "the cat")])]
    (root / "squad.json").write_text(json.dumps({"version": "1.1", "data": [
        {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    (root / "records").mkdir()
    write_pretraining_records(root / "records" / "train.tfrecord", 8)
    (root / "texts.txt").write_text("the cat sat on the mat\njohn lives ||| in paris\n")
    (root / "empty").mkdir()
    (root / "a_file").write_text("a user's file\n")
    (root / "stamped").mkdir()
    (root / "stamped" / run_folder.OWNER_NAME).write_text(json.dumps(
        {"task": "squad", "config_sha256": "0", "config": {}}))


_TOKENIZERS: dict[tuple[bytes, bool], FullTokenizer] = {}


def _shared_tokenizer(vocab_file: str, do_lower_case: bool = True) -> FullTokenizer:
    """One tokenizer per vocabulary and casing for all examples: building one traces its graph,
    seconds that would be most of a started run's cost, and it is no flag's business."""
    try:
        key = (Path(vocab_file).read_bytes(), do_lower_case)
    except OSError:
        return FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    return _TOKENIZERS[key]


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: a file's size and content hash, a folder as such."""
    entries = {}
    for folder, folders, files in os.walk(root):
        for name in folders:
            entries[os.path.relpath(os.path.join(folder, name), root)] = ("folder",)
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as reader:
                entries[os.path.relpath(path, root)] = ("file", hash(reader.read()))
    return entries


def _defined(script: str) -> flags.FlagValues:
    """The flags `script` defines, in a fresh registry (its strategies are drawn from them)."""
    values = flags.FlagValues()
    importlib.import_module(script).define_flags(values)
    return values


def _within(entry: str, places: list[str]) -> bool:
    return any(place == "." or entry == place or entry.startswith(place + os.sep)
               for place in places)


class RunnerFlagPropertiesTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fixtures = cls.class_folder() / "fixtures"
        _write_fixtures(cls.fixtures)
        cls.cache = cls.class_folder()

    def setUp(self):
        super().setUp()
        # A model name a flag gives is fetched from an address that refuses at once.
        for name, value in (("BERT_CACHE_DIR", str(self.cache)),
                            ("BERT_HF_URL", "http://127.0.0.1:9"),
                            ("BERT_GOOGLE_MODELS_URL", "http://127.0.0.1:9")):
            self.enter_context(mock.patch.dict(os.environ, {name: value}))
        self.enter_context(mock.patch("cli.runner_flags.strategy_from_flags",
                                      lambda values: tf.distribute.get_strategy()))
        self.enter_context(mock.patch("tasks.model_files.FullTokenizer", _shared_tokenizer))

    def _run(self, script: str, words: list[str]) -> None:
        """Runs `script`'s main on BASE + `words` in a fresh copy of the fixtures; checks it."""
        work = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        shutil.copytree(self.fixtures, work, dirs_exist_ok=True)
        before = _snapshot(work)
        previous = os.getcwd()
        os.chdir(work)
        try:
            outcome, message, values = self._ending(script, [f"{script}.py", *BASE[script],
                                                              *words])
        finally:
            os.chdir(previous)
            for folder in list(run_folder._HELD):  # a started run keeps its folder's lock
                run_folder.release(folder)
        event(f"{script}: {outcome}")
        after = _snapshot(work)
        changed = {entry for entry in set(before) | set(after)
                   if before.get(entry) != after.get(entry)}
        outputs = [os.path.normpath(os.path.relpath(os.path.join(work, values[name].value),
                                                    work)) for name in OUTPUT_FLAGS
                   if name in values and values[name].value]
        if outcome == "started":
            self.assertEmpty({entry for entry in changed if not _within(entry, outputs)})
            return
        stamps = {os.path.normpath(os.path.join(output, name)) for output in outputs
                  for name in (run_folder.LOCK_NAME, run_folder.OWNER_NAME)}
        self.assertEmpty(changed - stamps, f"refused ({message}) but changed the disk")
        if outcome == "unparsed":
            self.assertTrue(any(word.lstrip("-").split("=")[0].removeprefix("no") in message
                                for word in words if word.startswith("-")), message)
            return
        self.assertEqual(outcome, 1, message)
        self.assertRegex(message, rf"\A{script}\.py: error: [^\n]+\n\Z")
        # A flag's name, or a value the command line gave (a flag's, or a stray word).
        given_values = [str(values[name].value) for name in values if values[name].present]
        positional = words[words.index("--") + 1:] if "--" in words else []  # "--" ends flags
        given_values = [value for value in given_values if len(value) > 2] + [
            word for word in words if not word.startswith("--")] + positional
        self.assertTrue(any(f"--{name}" in message for name in values)
                        or any(value in message for value in given_values), message)

    def _ending(self, script: str, argv: list[str]) -> tuple[object, str, flags.FlagValues]:
        """("started" | "unparsed" | exit status, what the user is shown, the flags)."""
        module = importlib.import_module(script)
        values = flags.FlagValues()
        module.define_flags(values)
        program_flags = program.list_key_flags_under_program(module.__name__, values)
        try:
            rest = values(argv)
        except flags.Error as error:
            return "unparsed", str(error), values
        shown = io.StringIO()
        started = mock.patch(WORK_STARTS[script], side_effect=_WorkStarted)
        with contextlib.redirect_stderr(shown), started:
            try:
                with faults.one_line_endings(f"{script}.py", flags=program_flags):
                    module.main(rest, values)
            except SystemExit as ended:
                return ended.code, shown.getvalue(), values
            except _WorkStarted:
                return "started", "", values
        self.fail(f"{script} returned without starting its work: {argv}")

    # The runners' defaults, unchanged, start in every profile; the other examples are the
    # holes these properties found (each now refused in one line naming the flag).
    @example(words=["--vocab_file= "])
    @example(words=["--input_file=out"])
    @example(words=["--output_dir=a/../b"])
    @example(words=[])
    @given(words=flag_arguments(_defined("run_pretraining"), PATHS))
    def test_run_pretraining_starts_or_refuses_in_one_line(self, words):
        self._run("run_pretraining", words)

    @budget(quick=6)
    @example(words=['--do_train', 'false'])
    @example(words=['--random_seed=-1'])
    @example(words=['--random_seed=4294967295', '--num_restarts=2'])
    @example(words=['--num_restarts=2147483648', '--do_eval'])
    @example(words=[])
    @given(words=flag_arguments(_defined("run_classifier"), PATHS))
    def test_run_classifier_starts_or_refuses_in_one_line(self, words):
        self._run("run_classifier", words)

    @example(words=['--train_file= '])
    @example(words=['--max_query_length=13'])
    @example(words=['--bert_config_file= '])
    @example(words=['--bert_config_file=a\nb'])
    @example(words=[])
    @given(words=flag_arguments(_defined("run_squad"), PATHS))
    def test_run_squad_starts_or_refuses_in_one_line(self, words):
        self._run("run_squad", words)

    @budget(quick=6)
    @example(words=["--", "--no_such_flag=1"])
    @example(words=[])
    @given(words=flag_arguments(_defined("run_ner"), PATHS))
    def test_run_ner_starts_or_refuses_in_one_line(self, words):
        self._run("run_ner", words)

    @example(words=['--init_checkpoint= '])
    @example(words=['--input_file= '])
    @example(words=['--input_file=0'])
    @example(words=[])
    @given(words=flag_arguments(_defined("extract_features"), PATHS))
    def test_extract_features_starts_or_refuses_in_one_line(self, words):
        self._run("extract_features", words)

    @example(words=['--do_lower_case', 'false', '--source='])
    @example(words=[])
    @given(words=flag_arguments(_defined("export_model"), PATHS))
    def test_export_model_starts_or_refuses_in_one_line(self, words):
        self._run("export_model", words)


if __name__ == "__main__":
    tf.test.main()
