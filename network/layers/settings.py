"""Bases for layers and models whose constructor arguments are their whole Keras config."""

from __future__ import annotations

import keras

from network.config import BertConfig


class ConfigurableLayer(keras.layers.Layer):
    """Keeps the constructor's settings as attributes and serializes exactly those.

    Naming them once in `keep_settings` means a new argument cannot be stored
    and then forgotten in `get_config` (or the reverse), which would make a
    saved model rebuild with a default instead of the value it was trained with.
    A subclass may keep more settings after its base has kept its own.
    """

    def keep_settings(self, **settings) -> None:
        for name, value in settings.items():
            setattr(self, name, value)
        self._setting_names = (*getattr(self, "_setting_names", ()), *settings)

    def get_config(self) -> dict:
        return {**super().get_config(),
                **{name: getattr(self, name) for name in self._setting_names}}


class ConfigurableModel(ConfigurableLayer, keras.Model):
    """The model counterpart: a setting named `config` is the model's `BertConfig`.

    The config travels as a plain dict of BERT hyperparameters, so a `.keras`
    file rebuilds the same network without pickling a `BertConfig`, and the
    files of every BERT model read the same way.
    """

    def get_config(self) -> dict:
        config = super().get_config()
        if isinstance(config.get("config"), BertConfig):
            config["config"] = config["config"].to_dict()
        return config

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        if "config" in config:
            config["config"] = BertConfig.from_dict(config["config"])
        return cls(**config)
