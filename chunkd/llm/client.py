"""An OpenAI-compatible chat-completions endpoint (``--llm-url URL --llm-model NAME``:
OpenAI, vLLM, llama.cpp's server, Ollama), called as ``--embed-url`` is
(``chunkd.net.endpoint``: one timeout for the whole call, bounded answers, retries with
``Retry-After`` capped, the key from ``CHUNKD_LLM_API_KEY`` to the URL's own origin
only, never in a message).

Each answer's ``usage`` is read: prompt and completion tokens, and the prompt tokens the
server had cached (OpenAI's and vLLM's ``prompt_tokens_details.cached_tokens``,
llama.cpp's ``timings.cache_n``).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, NamedTuple

from chunkd.model.errors import LLMError
from chunkd.net.endpoint import FIRST_WAIT, LONGEST_WAIT

#: The environment variables of the key (never an option) and of a call's timeout in
#: seconds (a whole completion: reading the prompt, then writing the answer).
KEY_VARIABLE = "CHUNKD_LLM_API_KEY"
TIMEOUT_VARIABLE = "CHUNKD_LLM_TIMEOUT"
DEFAULT_TIMEOUT = "120"
#: The bytes an answer may hold: a completion of at most ``max_tokens`` tokens, with
#: what servers add (timings, log probabilities left off, a reasoning model's thoughts).
ANSWER_BYTES = 1 << 20
#: The bytes ``GET /v1/models`` or ``GET /props`` may answer.
INFO_BYTES = 1 << 20


#: A UTF-16 surrogate alone: json.loads joins a pair into one code point.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def writable(text: str) -> str:
    """``text`` as a record can hold it: a lone surrogate (JSON's ``"\\ud800"`` escape,
    in an answer or in the JSON a model writes in it), which UTF-8 cannot encode,
    becomes U+FFFD, as a decoder turns a byte it cannot read."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def chat_url(url: str) -> str:
    """The chat-completions URL of an endpoint, by ``--embed-url``'s rule
    (``chunkd.net.endpoint.api_url``): ``URL/v1/chat/completions``, ``URL/chat/
    completions`` for a URL ending in ``/v1``, a URL ending so as it is."""
    from chunkd.net.endpoint import api_url

    return api_url(url, "--llm-url", "chat/completions")


def timeout() -> float:
    """A call's timeout: ``CHUNKD_LLM_TIMEOUT`` seconds, else 120."""
    from chunkd.net.endpoint import seconds_from

    return seconds_from(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT)


class Completion(NamedTuple):
    """One answer: its text, and its tokens as the server counted them (None where it
    did not say)."""

    text: str
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


class ChatClient:
    """The model ``model`` at ``url`` (``chat_url``'s rule), each call one user message.
    Fields beyond OpenAI's own are sent only where servers take them: OpenAI's API
    refuses an unknown field (400), vLLM and llama.cpp's server ignore one, so
    ``cache_prompt`` (llama.cpp's: keep the prompt's cache for the next request) goes
    to every server but OpenAI's (``api.openai.com``, Azure's ``*.openai.azure.com``);
    ``prompt_cache_key`` (OpenAI's: requests of one key go to the same cache) to all."""

    def __init__(self, url: str, model: str, timeout_s: float | None = None,
                 first_wait: float = FIRST_WAIT, longest_wait: float = LONGEST_WAIT) -> None:
        import urllib.parse

        from chunkd.net.endpoint import Endpoint
        from chunkd.net.urls import identity_url

        self.endpoint = Endpoint(chat_url(url), "--llm-url", KEY_VARIABLE, LLMError,
                                 timeout() if timeout_s is None else timeout_s,
                                 first_wait, longest_wait)
        self.model = model
        #: The model as results and the cache know it: its name and the URL without
        #: credentials (another deployment may be another model).
        self.name = f"{model}@{identity_url(self.endpoint.url)}"
        host = (urllib.parse.urlsplit(self.endpoint.url).hostname or "").lower()
        self.openai = host == "api.openai.com" or host.endswith(".openai.azure.com")
        self._window: int | None = None
        self._asked = False
        self._asking = threading.Lock()

    def complete(self, prompt: str, cache_key: str, max_tokens: int,
                 given_up: threading.Event,
                 response_format: dict[str, Any] | None = None) -> Completion:
        """The model's answer to ``prompt`` (greedy: the same prompt, the same answer
        where the server is deterministic); ``LLMError`` if there is none, or it is
        empty. ``given_up`` (another call failed) ends the tries. ``response_format``:
        OpenAI's, such as a JSON schema the answer must follow (structured output)."""
        request: dict[str, Any] = {
            "model": self.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": False,
            "prompt_cache_key": cache_key}
        if not self.openai:
            request["cache_prompt"] = True
        if response_format is not None:
            request["response_format"] = response_format
        body = self.endpoint.post(json.dumps(request).encode(), ANSWER_BYTES, given_up,
                                  "for one completion")
        try:
            answer = json.loads(body)
            message = answer["choices"][0]["message"]
            text = message["content"]
        except RecursionError:
            self.endpoint.fail("the answer is not a chat completion (nested too deeply)")
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as error:
            self.endpoint.fail(f"the answer is not a chat completion ({type(error).__name__})")
        if not isinstance(text, str) or not text.strip():
            self.endpoint.fail("an empty completion")
        usage = _mapping(answer.get("usage"))
        timings = _mapping(answer.get("timings"))
        cached = _count(_mapping(usage.get("prompt_tokens_details")).get("cached_tokens"))
        if cached is None:
            cached = _count(timings.get("cache_n"))
        return Completion(writable(text).strip(), _count(usage.get("prompt_tokens")), cached,
                          _count(usage.get("completion_tokens")))

    def window(self) -> int | None:
        """The tokens the server's model takes, prompt and answer together, as the
        server says: vLLM's ``max_model_len`` on ``GET /v1/models`` (the entry of this
        model), else llama.cpp's ``n_ctx`` on ``GET /props``; None where neither
        answers so. Asked once."""
        with self._asking:
            if not self._asked:
                self._asked = True
                models = self._get("/v1/models")
                entries = [entry for entry in models.get("data") or []
                           if isinstance(entry, dict)] if isinstance(models.get("data"), list) \
                    else []
                mine = [entry for entry in entries if entry.get("id") == self.model] or (
                    entries if len(entries) == 1 else [])
                window = _count(mine[0].get("max_model_len")) if mine else None
                if window is None:
                    props = self._get("/props")
                    window = (_count(_mapping(props.get("default_generation_settings")).get("n_ctx"))
                              or _count(props.get("n_ctx")))
                self._window = window or None
            return self._window

    def _get(self, path: str) -> dict:
        """The JSON object a ``GET`` of another route answers; {} for anything else
        (no answer, a status, not JSON). One try, quiet: it only informs a default."""
        from chunkd.net.client import NoAnswer, ResponseTooLarge, call

        try:
            answer = call(self.endpoint.at(path), "GET", None, self.endpoint.headers(),
                          self.endpoint.timeout, INFO_BYTES)
        except (NoAnswer, ResponseTooLarge):
            return {}
        if not 200 <= answer.status < 300:
            return {}
        try:
            found = json.loads(answer.body)
        except (ValueError, RecursionError):
            return {}
        return found if isinstance(found, dict) else {}
