"""The error of settings that cannot work, raised wherever settings are checked (the
settings themselves, the strategies) and shown by every front end as one line."""


class SettingsError(ValueError):
    """Settings that cannot work; the message says what is wrong, in one line."""
