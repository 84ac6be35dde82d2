"""A base for layers whose constructor arguments are their whole Keras config."""

from __future__ import annotations

import keras


class ConfigurableLayer(keras.layers.Layer):
    """Keeps the constructor's settings as attributes and serializes exactly those.

    Naming them once in `keep_settings` means a new argument cannot be stored
    and then forgotten in `get_config` (or the reverse), which would make a
    saved model rebuild with a default instead of the value it was trained with.
    """

    def keep_settings(self, **settings) -> None:
        for name, value in settings.items():
            setattr(self, name, value)
        self._setting_names = tuple(settings)

    def get_config(self) -> dict:
        return {**super().get_config(),
                **{name: getattr(self, name) for name in self._setting_names}}
