"""A re-planned schedule and a restarted optimizer: the numbers of new ones, no new trace."""

import keras
import numpy as np

from modeling import BertClassifier
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder
from training.optimization import WarmupLinearDecay, create_optimizer
from training.replanning import OptimizerRestart, ReplannableDecay

TEXTS = ["a fine film", "a dull film", "great acting", "boring plot", "the film is great",
         "the plot was dull"]
LABELS = [1, 0, 1, 0, 1, 0]


class ReplannableDecayTest(TestCase):

    def test_each_plan_gives_the_rates_of_a_new_schedule_bit_for_bit(self):
        schedule = ReplannableDecay(3e-4, num_train_steps=7, num_warmup_steps=2)
        for total, warmup in ((7, 2), (20, 0), (5, 5), (1, 0)):
            schedule.replan(total, warmup)
            new = WarmupLinearDecay(3e-4, total, warmup)
            for step in range(total + 3):
                self.assertEqual(float(schedule(step)), float(new(step)), (total, warmup, step))

    def test_a_plan_a_new_schedule_refuses_is_refused_and_the_old_one_kept(self):
        schedule = ReplannableDecay(1e-4, num_train_steps=10, num_warmup_steps=1)
        with self.assertRaisesRegex(ValueError, "num_warmup_steps"):
            schedule.replan(4, 9)
        self.assertEqual((schedule.num_train_steps, schedule.num_warmup_steps), (10, 1))
        self.assertEqual(float(schedule(5)), float(WarmupLinearDecay(1e-4, 10, 1)(5)))


class OptimizerRestartTest(TestCase):

    def test_slots_and_steps_go_back_to_their_values_at_build(self):
        weight = keras.Variable(np.ones((2, 3), "float32"))
        optimizer = create_optimizer(1e-2, 10, 0)
        optimizer.build([weight])
        restart = OptimizerRestart(optimizer)
        built = [variable.numpy().copy() for variable in optimizer.variables]
        optimizer.apply_gradients([(np.full((2, 3), 0.5, "float32"), weight)])
        self.assertEqual(int(optimizer.iterations.numpy()), 1)
        restart()
        for variable, value in zip(optimizer.variables, built):
            self.assertAllEqual(variable.numpy(), value)


class FitAgainTest(TestCase):
    """A second `fit` re-plans in place: the traced step is kept, the result unchanged."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())

    def test_a_second_fit_keeps_the_trace_and_equals_one_on_a_new_optimizer(self):
        keras.utils.set_random_seed(0)
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16)
        model.compile(learning_rate=1e-3)
        model.fit(TEXTS, LABELS, batch_size=2, epochs=2, verbose=0)
        # Every variable, the dropout layers' seed states included, to train from twice.
        trained = [variable.numpy() for variable in model.variables]
        traced = model.train_function

        keras.utils.set_random_seed(1)
        model.fit(TEXTS[:5], LABELS[:5], batch_size=2, epochs=1, verbose=0)
        self.assertIs(model.train_function, traced)
        self.assertEqual(int(model.optimizer.iterations.numpy()), 3)  # ceil(5 / 2), from 0
        again = model.get_weights()

        for variable, value in zip(model.variables, trained):
            variable.assign(value)
        model.compile(learning_rate=1e-3)  # a new optimizer, as every fit had before
        keras.utils.set_random_seed(1)
        model.fit(TEXTS[:5], LABELS[:5], batch_size=2, epochs=1, verbose=0)
        self.assertIsNot(model.train_function, traced)
        for mine, fresh, variable in zip(again, model.get_weights(), model.weights):
            self.assertAllEqual(mine, fresh, variable.path)
