"""BertPretrainer + create_optimizer + pretraining_dataset under one_device and mirrored.

The mirrored case needs two logical CPU devices, which must be configured
before TensorFlow starts, so it runs in a subprocess.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.pretrainer import BertPretrainer
from network.config import BertConfig
from tests.fixtures import TestCase
from tests.training.test_distribution import run_python
from tests.training.test_input_pipeline import PREDS, SEQ, write_files
from training.distribution import get_strategy
from training.input_pipeline import pretraining_dataset
from training.optimization import create_optimizer

pytestmark = pytest.mark.slow


def train_tiny_bert(strategy: tf.distribute.Strategy, pattern: str, steps: int = 6,
                    epochs: int = 2) -> list[float]:
    """Per-epoch mean losses of a small BERT (L2/H128) on the records at `pattern`."""
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = BertPretrainer(BertConfig.preset("L2_H128", vocab_size=128))
        model.compile(optimizer=create_optimizer(2e-3, steps * epochs, 2))
    dataset = strategy.distribute_datasets_from_function(
        lambda context: pretraining_dataset(pattern, 8, SEQ, PREDS, True,
                                            input_context=context, seed=1))
    history = model.fit(dataset, steps_per_epoch=steps, epochs=epochs, verbose=0)
    return history.history["loss"]


MIRRORED_SCRIPT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from tests.training.test_training_integration import train_tiny_bert
from training.distribution import get_strategy
from training.optimization import create_optimizer

strategy = get_strategy("mirrored")
report = {"replicas": strategy.num_replicas_in_sync,
          "bert_losses": train_tiny_bert(strategy, sys.argv[1])}

# A linear model whose gradient norm is far above the clip norm: one device
# and two replicas must take the same steps, also when accumulating.
rng = np.random.default_rng(0)
x = rng.normal(size=(16, 4)).astype("float32")
y = (100 * rng.normal(size=(16, 2))).astype("float32")

def linear_weights(strategy, micro_batch, accumulation):
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.set_weights([np.ones((4, 2), "float32"), np.zeros(2, "float32")])
        model.compile(loss="mse", optimizer=create_optimizer(
            0.1, 2, 0, gradient_accumulation_steps=accumulation))
    model.fit(x, y, batch_size=micro_batch, shuffle=False, epochs=1, verbose=0)
    return model.get_weights()[0]

reference = linear_weights(tf.distribute.get_strategy(), 8, 1)
report["clipped_gap"] = float(np.abs(linear_weights(strategy, 8, 1) - reference).max())
report["accumulated_gap"] = float(np.abs(linear_weights(strategy, 4, 2) - reference).max())
report["moved"] = float(np.abs(reference - 1).max())
print(json.dumps(report))
"""


class TrainingIntegrationTest(TestCase):

    @pytest.mark.long
    def test_one_device_fit_lowers_the_loss(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 16)
        losses = train_tiny_bert(get_strategy("one_device"), str(tmp_path / "*"))
        self.assertTrue(all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.5, msg=losses)

    @pytest.mark.long
    def test_mirrored_over_two_cpus_trains_and_matches_one_device(self):
        tmp_path = self.tmp_path()
        write_files(tmp_path, 2, 16)
        script = f"import sys; sys.argv[1:] = [{str(tmp_path / '*')!r}]\n{MIRRORED_SCRIPT}"
        result = run_python(script, timeout=240)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        report = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(report["replicas"], 2)
        losses = report["bert_losses"]
        self.assertTrue(all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.5, msg=losses)
        self.assertGreater(report["moved"], 0.01)
        self.assertTrue(report["clipped_gap"] < 1e-6 and report["accumulated_gap"] < 1e-6,
                        msg=report)


if __name__ == "__main__":
    tf.test.main()
