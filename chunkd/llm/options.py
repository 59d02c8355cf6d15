"""The options of the LLM endpoint and of ``--context``, declared once (registered with
every command's settings, ``chunkd.options``).

``--context`` is written by the filter only, so far: the other front ends (``chunkd
watch``, ``sync``, ``serve``, ``eval``, the Python API) refuse it with one line rather
than leave their chunks without contexts; a front end that writes them makes its
settings within ``chunkd.options.supporting("context")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

# A cache folder is taken as --embed-cache's is: the user's own link followed once.
from chunkd.embeddings.selection import _check_folder, _linked_folder
from chunkd.model.errors import SettingsError
from chunkd.options import (Flag, Option, Record, choice, number_value, register_option,
                            supported, switch, whole)

if TYPE_CHECKING:
    from chunkd.embeddings.cache import DiskCache

#: Requests to the LLM in flight at once, unless ``--llm-concurrency`` says.
LLM_CONCURRENCY_DEFAULT = 4
ON_ERROR = ("fail", "keep")


def _check_url(value: Any, name: str) -> str:
    from chunkd.llm.client import chat_url

    chat_url(str(value))  # a URL that is not http(s) is a settings error
    return str(value)


def _public_url(value: str) -> str:
    from chunkd.net.urls import identity_url

    return identity_url(value)


def _check_prompt(value: Any, name: str) -> str:
    """A prompt file, read now (``prompt_text``): a file that cannot be read or that is
    no prompt is a settings error before any input is read."""
    prompt_text(str(value))
    return str(value)


def prompt_text(path: str) -> str:
    """The prompt in the file ``path``: UTF-8 text holding ``{document}`` once, then
    ``{chunk}`` once (the document first, so that every request of a document begins
    with the same text, which the server's prompt cache keeps)."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read(1 << 20)
    except (OSError, UnicodeDecodeError) as error:
        from chunkd.inputs.readers import display_name

        why = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise SettingsError(f"--context-prompt {display_name(path)}: {why}") from None
    if text.count("{document}") != 1 or text.count("{chunk}") != 1 \
            or text.index("{document}") > text.index("{chunk}"):
        raise SettingsError("--context-prompt: the prompt must hold {document} once, then "
                            "{chunk} once (the document first, so that each document's "
                            "requests begin alike and its server's cache serves them)")
    return text


@functools.lru_cache(maxsize=None)
def context_cache(folder: str) -> DiskCache:
    """The cache of the LLM's answers (contexts, boundaries, propositions) in ``folder``,
    once a process: one not to be trusted (a link, a folder others may write) is a
    ``SettingsError``, which the settings checks meet first (a usage error before any
    input is read)."""
    from chunkd.embeddings.cache import DiskCache

    return DiskCache(folder, option="--llm-cache",
                     missed="answers it cannot give are asked of the LLM again")


def _prompt_identity(path: str) -> str:
    """A prompt file as results record it: the SHA-256 of its text (another prompt,
    other contexts)."""
    import hashlib

    return "sha256:" + hashlib.sha256(prompt_text(path).encode()).hexdigest()


#: The options that say how contexts are asked for, by name: for ``--context`` only.
_LLM_OPTIONS = ("llm_url", "llm_model", "llm_concurrency", "llm_cache", "llm_window",
                "context_prompt", "context_on_error")


#: The strategies that ask the LLM how to cut (each module adds its name), with the
#: options of ``_CONTEXT_ONLY`` it reads too: the endpoint's options serve them as they
#: serve ``--context``, in every front end.
STRATEGIES_ASKING: dict[str, tuple[str, ...]] = {}
#: The options that ``--context`` reads, and a strategy only where it says so.
_CONTEXT_ONLY = ("llm_window", "context_prompt", "context_on_error")


def strategy_reads(strategy: str, name: str) -> bool:
    """Whether ``--strategy STRATEGY`` reads the LLM's option ``name`` (of
    ``OPTIONS_BY_NAME``), so that a front end serving several strategies gives each
    only those it reads."""
    return strategy in STRATEGIES_ASKING and (name not in _CONTEXT_ONLY
                                              or name in STRATEGIES_ASKING[strategy])


def _timeout_checked() -> None:
    """``CHUNKD_LLM_TIMEOUT`` read now: a value that is no timeout is a usage error
    before any input is read, not a failure of each call."""
    from chunkd.llm.client import timeout

    timeout()


def _context_checked(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """``--context`` needs an endpoint and its model, in a front end that writes
    contexts, and so does a strategy that asks the LLM; the LLM's options are for
    them."""
    asking = values.get("strategy") in STRATEGIES_ASKING
    if asking and not values["context"]:
        if values["llm_url"] is None or values["llm_model"] is None:
            raise SettingsError(f"--strategy {values['strategy']} needs an LLM: "
                                f"{spell('llm_url')} URL {spell('llm_model')} NAME (an "
                                "OpenAI-compatible chat endpoint and the model it serves)")
        given = [name for name in _CONTEXT_ONLY if OPTIONS_BY_NAME[name].is_set(values)
                 and name not in STRATEGIES_ASKING[values["strategy"]]]
        if given:
            raise SettingsError(f"{spell(given[0])} is for --context")
        _timeout_checked()
        if values["llm_cache"] is not None:
            context_cache(values["llm_cache"])
        return
    if values["context"]:
        if not supported("context"):
            raise SettingsError(f"{spell('context')} is written by the filter (chunkd "
                                "FILES) so far: chunkd watch, sync, serve, eval and the "
                                "Python API do not write contexts yet")
        if values["llm_url"] is None or values["llm_model"] is None:
            raise SettingsError(f"{spell('context')} needs an LLM: {spell('llm_url')} URL "
                                f"{spell('llm_model')} NAME (an OpenAI-compatible chat "
                                "endpoint and the model it serves)")
        _timeout_checked()
        if values["llm_cache"] is not None:
            context_cache(values["llm_cache"])  # a folder not to be trusted: said now
        return
    given = [name for name in _LLM_OPTIONS if OPTIONS_BY_NAME[name].is_set(values)]
    if given:
        users = " or ".join(["--context", *(f"--strategy {name}"
                                             for name in sorted(STRATEGIES_ASKING))])
        raise SettingsError(f"{spell(given[0])} is for {users}")


#: Each chunk's context, written by the LLM from the whole document.
CONTEXT = register_option(Option[bool](
    False, "add context", name="context", check=switch, check_with=_context_checked,
    fields=("context",), flags=(
        Flag("--context", "the filter only, so far: add \"context\": a short text the LLM "
                          "(--llm-url, --llm-model) "
                          "writes from the whole document to situate each chunk in it "
                          "(contextual retrieval); text, start, end and chunk_id are "
                          "unchanged; with --embed-text, embed_text begins with it"),)),
    after="vectors")
#: The endpoint; results record the URL without credentials, and the model's name.
LLM_URL = register_option(Option[str](
    None, "an OpenAI-compatible chat endpoint", name="llm_url", check=_check_url,
    to_json=_public_url, flags=(
        Flag("--llm-url", "--context: an OpenAI-compatible chat endpoint: "
                          "URL/v1/chat/completions is called (a URL ending in /v1 or "
                          "/v1/chat/completions is taken as it is); the API key comes from "
                          "CHUNKD_LLM_API_KEY, the timeout of a call from "
                          "CHUNKD_LLM_TIMEOUT (seconds, default 120)", metavar="URL",
             parse=str),)), after="context")
LLM_MODEL = register_option(Option[str](
    None, "the model a chat endpoint serves", name="llm_model", flags=(
        Flag("--llm-model", "the model --llm-url serves, as the endpoint names it",
             metavar="NAME", parse=str),)), after="llm_url")
#: How the endpoint is called: the same contexts, so results do not record it.
LLM_CONCURRENCY = register_option(Option[int](
    LLM_CONCURRENCY_DEFAULT, "requests in flight to the chat endpoint",
    name="llm_concurrency", check=whole(1), record=Record.NEVER,
    flags=(Flag("--llm-concurrency", "requests to --llm-url in flight at once, after each "
                "document's first (default: "
                f"{LLM_CONCURRENCY_DEFAULT}; 1: one after another)", metavar="N",
                parse=number_value),)), after="llm_model")
#: The LLM's window, where the server does not say it (or says it wrongly).
LLM_WINDOW = register_option(Option[int](
    # (at least 1024: the answer's 200 tokens and the prompt's own leave little below)
    None, "the tokens the LLM takes", name="llm_window", check=whole(1024), flags=(
        Flag("--llm-window", "--context, --strategy llm: the tokens the LLM takes, prompt "
                             "and answer "
                             "(default: the server's, GET /v1/models' max_model_len or "
                             "llama.cpp's GET /props, else 8192); --context gives a longer "
                             "document as its outline and the text around each chunk, "
                             "--strategy llm fits its windows within it",
             metavar="N", parse=number_value),)), after="llm_concurrency")
CONTEXT_PROMPT = register_option(Option[str](
    None, "the prompt that asks for a chunk's context", name="context_prompt",
    check=_check_prompt, to_json=_prompt_identity, flags=(
        Flag("--context-prompt", "--context: the prompt, a UTF-8 file holding {document} "
                                 "then {chunk} (default: chunkd's, docs/context.md)",
             metavar="FILE", parse=str),)), after="llm_window")
CONTEXT_ON_ERROR = register_option(Option[str](
    "fail", "what a chunk without its context does", name="context_on_error",
    check=choice(*ON_ERROR), flags=(
        Flag("--context-on-error", "--context: a chunk the LLM gave no context fails its "
                                   "document (fail, default: exit 1, the other documents "
                                   "chunked), or is written with \"context\": null, and "
                                   "their count said (keep)", choices=ON_ERROR),)),
    after="context_prompt")
#: A cache of contexts on disk: the same contexts, so results do not record it.
LLM_CACHE = register_option(Option[str](
    None, "a folder of contexts cached on disk", name="llm_cache", check=_check_folder,
    record=Record.NEVER, flags=(
        Flag("--llm-cache", "--context: keep every context in DIR (made if missing; shared "
                            "safely by processes): a chunk asked before, of the same "
                            "document, model and prompt, is not asked again; --strategy "
                            "llm: every window's boundaries, by its text, model and prompt",
             metavar="DIR", parse=_linked_folder),)),
    after="context_on_error")

OPTIONS_BY_NAME = {option.name: option for option in (
    CONTEXT, LLM_URL, LLM_MODEL, LLM_CONCURRENCY, LLM_WINDOW, CONTEXT_PROMPT,
    CONTEXT_ON_ERROR, LLM_CACHE)}
