"""The order in which `fit` feeds examples: each batch a function of a seed and its position.

Each pass over the N examples is a permutation drawn by a stateless
shuffle from (seed, pass number), cut into batches of B with a short last
one (ceil(N / B) batches, as Keras' `fit` batches arrays); the passes
follow one another in one stream, which `fit` cuts into its epochs.
Nothing in the order depends on what ran before, so a `fit` resumed at
batch k (`training.resume`) starts the stream there and feeds the batches
an uninterrupted one would, without reading or replaying the first k.

Why not `Dataset.shuffle`: its order depends on the global seed, and with
`reshuffle_each_iteration` on how many times the dataset was read, which a
new process cannot reproduce; an iterator checkpoint would hold a shuffle
buffer as large as the data.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable

import keras
import tensorflow as tf
from absl import logging


def draw_seed() -> int:
    """A seed for a new order, from Python's generator (`keras.utils.set_random_seed` seeds it)."""
    return random.randrange(2 ** 31)


class ExampleOrder:
    """Batches of `columns` (tensors, or nests of them, one row per example) in a seeded order.

    Args:
      columns: the examples, as a nest of tensors (ragged ones too) whose rows align.
      count: the number of rows.
      batch_size: examples per batch; each pass ends with its short batch, if any.
      shuffle: whether each pass is a fresh permutation; False keeps the given order.
    """

    def __init__(self, columns, count: int, batch_size: int, shuffle: bool):
        self.columns = columns
        self.count = count
        self.batch_size = batch_size
        self.shuffle = shuffle

    @property
    def batches_per_pass(self) -> int:
        return math.ceil(self.count / self.batch_size)

    def stamp(self) -> dict:
        """What a resumed run must share with the run it continues: the examples (by a
        SHA-256 of their tensors), their number, the batch size and whether they are shuffled."""
        hasher = hashlib.sha256()
        for part in tf.nest.flatten(self.columns, expand_composites=True):
            hasher.update(tf.io.serialize_tensor(part).numpy())
        return {"examples": self.count, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "examples_sha256": hasher.hexdigest()}

    def batches(self, seed: int, start: int, stop: int) -> tf.data.Dataset:
        """Batches `start` to `stop` (exclusive, counted from 0) of the stream of passes."""
        per_pass = self.batches_per_pass
        first, last = start // per_pass, (stop - 1) // per_pass
        seed = tf.constant(seed, tf.int64)

        def one_pass(index):
            order = tf.range(self.count, dtype=tf.int64)
            if self.shuffle:
                order = tf.random.experimental.stateless_shuffle(
                    order, seed=tf.stack([seed, index]))
            return tf.data.Dataset.from_tensor_slices(order).batch(self.batch_size)

        rows = tf.data.Dataset.range(first, last + 1).flat_map(one_pass)
        rows = rows.skip(start - first * per_pass).take(stop - start)
        return rows.map(lambda picked: tf.nest.map_structure(
            lambda column: tf.gather(column, picked), self.columns))


def fit_in_order(keras_fit: Callable, order: ExampleOrder, seed: int, done: int,
                 per_epoch: int, epochs: range, preprocess: Callable, **kwargs
                 ) -> keras.callbacks.History:
    """Keras' `fit` over `order`'s batches from batch `done` on, as one history.

    Args:
      keras_fit: Keras' own `Model.fit`, bound to the model.
      order: the examples and how they are batched.
      seed: the order's seed.
      done: batches a killed run already trained on (0 for a new run).
      per_epoch: steps per Keras epoch.
      epochs: the run's epochs, as Keras numbers them (`initial_epoch` to `epochs`).
      preprocess: maps a batch of `order`'s columns to the model's inputs.
      **kwargs: the rest of `keras_fit`'s arguments (callbacks, validation_data...).

    Keras runs `per_epoch` steps in every epoch it starts, so the rest of an
    epoch a kill cut short is a `fit` call of its own.
    """
    epoch, into = divmod(done, per_epoch)
    epoch += epochs.start
    segments = [(epoch, epoch + 1, per_epoch - into)] if into else []
    if epoch + bool(into) < epochs.stop:
        segments.append((epoch + bool(into), epochs.stop, per_epoch))
    histories, start = [], done
    for first, stop, steps in segments:
        end = start + steps * (stop - first)
        batches = order.batches(seed, start, end).map(preprocess,
                                                      num_parallel_calls=tf.data.AUTOTUNE)
        histories.append(keras_fit(batches.prefetch(tf.data.AUTOTUNE), epochs=stop,
                                   initial_epoch=first, steps_per_epoch=steps, shuffle=False,
                                   **kwargs))
        start = end
        if histories[-1].model.stop_training:
            break
    if not histories:
        logging.info("fit: the checkpoint resumed from had done all %d steps", done)
        history = keras.callbacks.History()
        history.epoch = []
        return history
    return _merged(histories)


def _merged(histories: list[keras.callbacks.History]) -> keras.callbacks.History:
    """One History of the `fit` calls of one run, epochs in order."""
    merged = histories[-1]
    keys = dict.fromkeys(key for history in histories for key in history.history)
    merged.history = {key: [value for history in histories
                            for value in history.history.get(key, [])] for key in keys}
    merged.epoch = [epoch for history in histories for epoch in history.epoch]
    return merged
