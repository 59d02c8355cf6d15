"""The errors every front end shows as one line: settings that cannot work, raised
wherever settings are checked (the settings themselves, the strategies), and a model
that failed while embedding. Here, not beside what raises them, so that a front end
that catches them needs nothing more."""


class SettingsError(ValueError):
    """Settings that cannot work; the message says what is wrong, in one line."""


class EmbedError(Exception):
    """A model that failed while embedding (an endpoint that answered wrong, or not at
    all); the message says what, in one line."""


class LLMError(Exception):
    """An LLM endpoint that failed (no answer, a status, an answer that is no
    completion), or a chunk left without its context; the message says what, in one
    line."""
