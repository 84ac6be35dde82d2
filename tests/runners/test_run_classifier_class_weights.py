"""run_classifier.py --class_weights: refused when wrong, logged, stamped on the output folder."""

import json
import re

import pytest

from tests.fixtures import run_main
from tests.runners.test_run_classifier import BAD, GOOD, Sst2FolderTestCase, _arguments


class ClassWeightsFlagTest(Sst2FolderTestCase):

    def _refused(self, message, **flags) -> None:
        output = self.tmp_path() / "new_output"
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            run_main("run_classifier.py", _arguments(self.sst2, output, **flags))
        self.assertFalse(output.exists())  # made by the run, removed with its refusal

    def test_bad_weights_are_refused_naming_the_flag(self):
        self._refused("--class_weights names 'maybe', not among the task's labels 0, 1",
                      class_weights="1:2,maybe:3")
        self._refused("--class_weights names '5', not among the task's labels 0, 1",
                      class_weights="0:1,1:1,5:2")
        self._refused("--class_weights: the weight of '0' is '-1.0'; a weight is a finite "
                      "number >= 0", class_weights="0:-1.0,1:1.0")
        self._refused("--class_weights: the weight of '1' is '-1'; a weight is a finite "
                      "number >= 0", class_weights="1:-1")
        self._refused("--class_weights: the weight of '1' is 'nan'", class_weights="1:nan")
        self._refused("--class_weights weighs the training loss: pass --do_train too",
                      class_weights="balanced", do_train=False,
                      init_checkpoint=self.sst2 / "bert_config.json")
        stsb = self.tmp_path() / "STS-B"
        stsb.mkdir()
        (stsb / "train.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(
            f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(GOOD, BAD))))
        self._refused("--class_weights weighs classes; --task_name=STS-B is a regression",
                      class_weights="balanced", task="STS-B", data_dir=stsb, do_eval=False,
                      do_predict=False)

    @pytest.mark.long
    @pytest.mark.slow
    def test_weights_are_logged_stamped_and_a_resume_with_others_refused(self):
        output = self.tmp_path()
        quick = {"do_eval": False, "do_predict": False, "num_train_epochs": 1,
                 "export_saved_model": False}
        with self.assertLogs(logger="absl", level="INFO") as logs:
            run_main("run_classifier.py", _arguments(self.sst2, output, class_weights="1:3",
                                                     **quick))
        self.assertTrue(any("Class weights (1:3) over 40 training examples: 0=1, 1=3" in line
                            for line in logs.output), logs.output)
        stamp = json.loads((output / "run_owner.json").read_text())
        self.assertEqual(stamp["config"]["class_weights"], "1:3")
        with self.assertRaisesRegex(ValueError, "holds a classification:sst-2 run with "
                                    "class_weights=1:3 .*this is a classification:sst-2 run "
                                    "with class_weights=balanced"):
            run_main("run_classifier.py", _arguments(self.sst2, output,
                                                     class_weights="balanced", **quick))
        with self.assertRaisesRegex(ValueError, "class_weights=none"):
            run_main("run_classifier.py", _arguments(self.sst2, output, **quick))
        # Evaluating needs no weights, and keeps the record for a later training.
        run_main("run_classifier.py", _arguments(self.sst2, output, do_train=False,
                                                 do_eval=True, init_checkpoint=output,
                                                 do_predict=False))
        stamp = json.loads((output / "run_owner.json").read_text())
        self.assertEqual(stamp["config"]["class_weights"], "1:3")
