"""Contextual retrieval (``--context``): each chunk's ``context``, a short text the LLM
writes from the whole document to situate the chunk in it.

A per-document step that any front end calls with a document's text and all its chunks
(``Contexts.document``): the chunks come back with ``context`` set (and ``embed_text``,
where there is one, beginning with it); ``text``, ``start``, ``end`` and ``chunk_id``
are never changed.

* Cheap by construction: every request of a document begins with the same text (the
  prompt up to ``{document}``, the document, the prompt up to ``{chunk}``), and only
  the chunk differs after it; the document's first request goes alone, so that the
  server's prompt cache holds the document before the others (at most
  ``--llm-concurrency`` at once) read it.
* Never asked twice: with ``--llm-cache DIR`` each context is kept by the SHA-256 of
  the model, the answer's bound and the whole prompt (so the prompt, the document and
  the chunk), in ``chunkd.embeddings.cache``'s store (SQLite, shared by processes, a
  damaged entry a miss).
* Never cut silently: a document whose prompt does not fit the LLM's window is given
  as its outline (its Markdown headings) and the text around each chunk, and the
  prompt says so; a server that reports reading under half of a prompt is named once
  (``Contexts.notes``).
* Never silent: a chunk without its context (no answer, an empty one) fails its
  document (``LLMError``), or with ``--context-on-error keep`` stays without one
  (``Contextualized.missing`` says how many).
* Said: ``Cost`` counts the calls, the tokens the server reports, the cached ones among
  them, and the seconds spent waiting for them.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.llm.client import ChatClient, Completion
from chunkd.model.chunk import NULL, Chunk
from chunkd.model.errors import LLMError

if TYPE_CHECKING:
    from chunkd.embeddings.cache import DiskCache

#: chunkd's prompt, in the spirit of Anthropic's contextual-retrieval prompt (2024):
#: the document first, so that each of its requests begins with the same text.
PROMPT = """<document>
{document}
</document>

Here is a chunk of the document above:
<chunk>
{chunk}
</chunk>

Give a short, succinct context that situates this chunk within the overall document, \
for the purposes of improving search retrieval of the chunk: what the document is, and \
what part of it the chunk is. Answer with the context only, in the document's language."""
#: The tokens a context may take.
ANSWER_TOKENS = 200


class Cost:
    """What the contexts of a run cost, summed over its documents (from the threads that
    ask, one at a time): calls answered, the tokens the server reported, and the
    seconds spent asking; ``reused``: contexts the cache gave."""

    def __init__(self) -> None:
        self.calls = self.prompt = self.cached = self.completion = self.reused = 0
        self.seconds = 0.0
        self.lock = threading.Lock()

    def add(self, completion: Completion) -> None:
        with self.lock:
            self.calls += 1
            self.prompt += completion.prompt_tokens or 0
            self.cached += completion.cached_tokens or 0
            self.completion += completion.completion_tokens or 0

    def line(self, shown: str, what: str = "--context") -> str:
        """The run's cost in one line (``shown``: the endpoint as messages show it;
        ``what``: what asked)."""
        reused = f"; {self.reused:,} from --llm-cache" if self.reused else ""
        return (f"{what}: {self.calls:,} LLM calls to {shown}, {self.prompt:,} prompt "
                f"tokens ({self.cached:,} cached), {self.completion:,} completion tokens, "
                f"{self.seconds:.1f} s{reused}")


class Contextualized(NamedTuple):
    """A document's chunks with their contexts; ``missing``: how many have none (with
    ``--context-on-error keep``), and ``why``: the first failure's message."""

    chunks: list[Chunk]
    missing: int
    why: str | None


#: The LLM's window where neither ``--llm-window`` nor the server says it.
DEFAULT_WINDOW = 8192
#: What the prompt may take of the window: all but the answer and an eighth, since
#: its tokens are counted in cl100k_base, not in the LLM's own tokenizer, and the
#: server's chat template adds its own.
SPARE = 8
#: What of the window the outline may take, at most.
OUTLINE_SHARE = 4
#: The tokens of the note that says a document is given in part, and more.
EXCERPT_NOTE_TOKENS = 64
#: A Markdown heading (ATX), and a fence that opens or closes a code block.
_HEADING = re.compile(r"[ ]{0,3}#{1,6}[ \t]+\S.*")
_FENCE = re.compile(r"[ ]{0,3}(```|~~~)")


class Contexts:
    """The contexts of every document of a run, asked of ``client`` with ``prompt``
    (holding ``{document}`` then ``{chunk}``), at most ``concurrency`` requests at
    once after each document's first; kept in ``cache`` if given; chunks without one
    failing their document unless ``keep``. ``window``: the LLM's tokens, else the
    server's (``ChatClient.window``), else ``DEFAULT_WINDOW``."""

    def __init__(self, client: ChatClient, prompt: str, concurrency: int,
                 cache: DiskCache | None = None, keep: bool = False,
                 window: int | None = None) -> None:
        self.client, self.prompt, self.concurrency = client, prompt, concurrency
        self.cache, self.keep, self.given_window = cache, keep, window
        self.cost = Cost()
        head, _, self.tail = prompt.partition("{chunk}")
        self.before, _, self.between = head.partition("{document}")
        self._window: int | None = None
        #: Lines for the front end to say (the filter: on stderr), and whether the one
        #: naming a server that cut a prompt was said (once a run).
        self.notes: list[str] = []
        self.cut_said = False

    @property
    def window(self) -> int:
        if self._window is None:
            self._window = self.given_window or self.client.window() or DEFAULT_WINDOW
        return self._window

    def document(self, text: str, chunks: list[Chunk]) -> Contextualized:
        """``chunks`` of the document ``text``, each with its context; ``LLMError`` if
        one is left without (unless ``keep``)."""
        if not chunks:
            return Contextualized(chunks, 0, None)
        prefixes, sizes = self._prefixes(text, chunks)
        # Each prompt's key: the state of the hash after its prefix, copied.
        states: dict[str, Any] = {}
        keys = []
        for prefix, chunk in zip(prefixes, chunks):
            if prefix not in states:
                states[prefix] = hashlib.sha256(
                    f"{self.client.name}\0{ANSWER_TOKENS}\0".encode()
                    + prefix.encode("utf-8", "surrogatepass"))
            key = states[prefix].copy()
            key.update((chunk.text + self.tail).encode("utf-8", "surrogatepass"))
            keys.append(key.digest())
        contexts: dict[bytes, str] = {}
        if self.cache is not None:
            found = self.cache.get(list(dict.fromkeys(keys)))
            contexts = {key: value.decode("utf-8", "replace") for key, value in found.items()}
            with self.cost.lock:
                self.cost.reused += sum(key in contexts for key in keys)
        asked = [key for key in dict.fromkeys(keys) if key not in contexts]
        failures: list[str] = []
        if asked:
            started = time.monotonic()
            # One key a document: its requests go where its prefix is cached.
            cache_key = "chunkd-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")
                                                   ).hexdigest()[:32]
            by_key = {key: index for index, key in enumerate(keys)}

            def ask(key: bytes, given_up: threading.Event) -> None:
                index = by_key[key]
                completion = self.client.complete(
                    prefixes[index] + chunks[index].text + self.tail, cache_key,
                    ANSWER_TOKENS, given_up)
                self.cost.add(completion)
                self._check_cut(completion, sizes[index])
                contexts[key] = completion.text
                if self.cache is not None:
                    self.cache.put([(key, completion.text.encode("utf-8", "surrogatepass"))])

            try:
                _each(asked, ask, self.concurrency, failures, stop_at_failure=not self.keep)
            finally:
                with self.cost.lock:
                    self.cost.seconds += time.monotonic() - started
        missing = sum(key not in contexts for key in keys)
        if missing and not self.keep:
            raise LLMError(f"{missing} of {len(chunks)} chunks got no context: "
                           f"{failures[0] if failures else 'no answer'} "
                           "(--context-on-error keep writes them without)")
        return Contextualized([_with_context(chunk, contexts.get(key))
                               for chunk, key in zip(chunks, keys)], missing,
                              failures[0] if failures else None)

    def _prefixes(self, text: str, chunks: list[Chunk]) -> tuple[list[str], list[int]]:
        """Each chunk's prompt up to the chunk, and the prompt's tokens (cl100k_base):
        the whole document where the prompt fits the window with the longest chunk,
        else the document's outline and the text around the chunk (said in the prompt
        itself, never cut silently)."""
        from chunkd.units import resolve

        count = resolve("cl100k_base").count
        budget = self.window - ANSWER_TOKENS - self.window // SPARE
        tail = count(self.tail)
        longest = max(count(chunk.text) for chunk in chunks)
        whole = self.before + text + self.between
        tokens = count(whole)
        if tokens + longest + tail <= budget:
            return [whole] * len(chunks), [tokens + count(chunk.text) + tail
                                           for chunk in chunks]
        outline = _outline(text, count, budget // OUTLINE_SHARE)
        fixed = count(self.before + self.between + outline) + tail + EXCERPT_NOTE_TOKENS
        prefixes, sizes = [], []
        for chunk in chunks:
            start, end = _around(text, chunk, budget - fixed - count(chunk.text), count)
            # The outline first: the requests of a document still begin alike.
            part = (f"[The document is too long to give whole: its outline, then its text "
                    f"around the chunk.]\n\nOutline:\n{outline}\n\nText from code point "
                    f"{start:,} to {end:,} of {len(text):,}:\n{text[start:end]}")
            prefixes.append(self.before + part + self.between)
            sizes.append(count(prefixes[-1]) + count(chunk.text) + tail)
        return prefixes, sizes

    def _check_cut(self, completion: Completion, sent: int) -> None:
        """Say once (``notes``) when the server counted under half the tokens the
        prompt has: it read part of it (Ollama cuts a prompt to its ``num_ctx``)."""
        counted = completion.prompt_tokens
        if counted is None or counted * 2 >= sent or self.cut_said:
            return
        self.cut_said = True
        self.notes.append(f"--llm-url {self.client.endpoint.shown}: the server counted "
                          f"{counted:,} prompt tokens for a prompt of about {sent:,}: it "
                          "cut the prompt, and contexts were written from part of it "
                          "(give --llm-window the server's window, or raise it there)")


def _outline(text: str, count: Callable[[str], int], room: int) -> str:
    """The document's Markdown headings, a line each, within ``room`` tokens (the
    first ones, then a line saying how many more)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.fullmatch(line):
            lines.append(line.strip())
    if not lines:
        return "(no headings)"
    kept, used = [], 0
    for number, line in enumerate(lines):
        used += count(line) + 1
        if used > room:
            kept.append(f"(and {len(lines) - number:,} more headings)")
            break
        kept.append(line)
    return "\n".join(kept)


def _around(text: str, chunk: Chunk, room: int, count: Callable[[str], int]) -> tuple[int, int]:
    """The span of ``text`` around the chunk, as much as fits ``room`` tokens, the
    chunk in its middle (the document's ends bound it)."""
    if room <= 0:
        return chunk.start, chunk.start
    sample = text[:1 << 16]  # the code points a token holds, as in the document's start
    per_token = len(sample) / max(1, count(sample))
    width = int(room * per_token)
    while True:
        middle = (chunk.start + chunk.end) // 2
        start = max(0, middle - width // 2)
        end = min(len(text), start + width)
        start = max(0, end - width)
        if width <= 0 or count(text[start:end]) <= room:
            return start, end
        width = width * 9 // 10


def _with_context(chunk: Chunk, context: str | None) -> Chunk:
    """The chunk with its context, which its ``embed_text`` (if any) begins with."""
    if context is None or chunk.embed_text is None:
        return chunk._replace(context=NULL if context is None else context)
    return chunk._replace(context=context, embed_text=context + "\n\n" + chunk.embed_text)


def _each(keys: list[bytes], ask: Callable[[bytes, threading.Event], None], concurrency: int,
          failures: list[str], stop_at_failure: bool) -> None:
    """``ask`` each of ``keys``: the first alone, then the others from up to
    ``concurrency`` daemon threads (an interrupt does not wait for them: those in
    flight end at their next try). Each failure's message goes to ``failures``; with
    ``stop_at_failure`` the first ends the tries of the others and nothing more is
    sent."""
    given_up = threading.Event()
    lock = threading.Lock()

    def one(key: bytes) -> None:
        try:
            ask(key, given_up)
        except LLMError as error:
            with lock:
                failures.append(str(error))
            if stop_at_failure:
                given_up.set()

    one(keys[0])  # alone: the server caches the document's prefix before the others
    rest = iter(keys[1:])

    def work() -> None:
        while not given_up.is_set():
            with lock:
                key = next(rest, None)
            if key is None:
                return
            one(key)

    threads = [threading.Thread(target=work, daemon=True, name="chunkd-context")
               for _ in range(min(concurrency, len(keys) - 1))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        given_up.set()


def contexts(settings: Any) -> Contexts:
    """The ``Contexts`` that settings with ``--context`` ask for (``Settings``, or
    values by option name)."""
    from chunkd.llm.options import context_cache, prompt_text

    get = getattr(settings, "_values", settings).get
    cache = None if get("llm_cache") is None else context_cache(get("llm_cache"))
    prompt = PROMPT if get("context_prompt") is None else prompt_text(get("context_prompt"))
    return Contexts(ChatClient(get("llm_url"), get("llm_model")), prompt,
                    get("llm_concurrency"), cache, keep=get("context_on_error") == "keep",
                    window=get("llm_window"))
