"""tasks.pretraining refuses records written for the other kind of objective, before training."""

import os
from pathlib import Path

import tensorflow as tf
from absl.testing import parameterized

from tasks import pretraining
from tests.fixtures import write_pretraining_records


class ObjectiveAgainstRecordsTest(tf.test.TestCase, parameterized.TestCase):

    def _records(self, masked: bool) -> str:
        return str(write_pretraining_records(Path(self.get_temp_dir()) / f"{masked}.tfrecord",
                                             8, masked=masked))

    def test_ltr_on_masked_records_is_refused_naming_the_file(self):
        path = self._records(masked=True)
        with self.assertRaisesRegex(ValueError, f"^objective=ltr: {path} holds masked records "
                                                "\\(8 of its first 8 have masked positions"):
            pretraining.check_records_fit_objective(path, "ltr")

    @parameterized.parameters("mlm", "mlm_nsp")
    def test_a_masked_lm_on_unmasked_records_is_refused(self, objective):
        path = self._records(masked=False)
        with self.assertRaisesRegex(ValueError, f"^objective={objective}: none of the first 8 "
                                                f"records of {path} has a masked position"):
            pretraining.check_records_fit_objective(os.path.join(os.path.dirname(path), "*"),
                                                    objective)

    @parameterized.parameters(("ltr", False), ("mlm", True), ("mlm_nsp", True))
    def test_records_of_the_right_kind_pass(self, objective, masked):
        pretraining.check_records_fit_objective(self._records(masked), objective)


if __name__ == "__main__":
    tf.test.main()
