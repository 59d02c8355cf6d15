"""The propositions strategy: agentic chunks that point at their sources.

The document is cut into passages by the recursive strategy at the size given; the LLM
(``--llm-url``, ``--llm-model``) turns each passage into short self-contained statements
(propositions, as in Dense X Retrieval, arXiv 2312.06648) grouped into topic chunks
with a title and a summary, answering JSON ``{"chunks": [{"title", "summary",
"propositions": [...]}]}`` (asked with OpenAI's ``response_format`` JSON schema, which
vLLM and llama.cpp's server also take). A record's ``text`` is a group's propositions,
one a line: no slice of the document. chunkd aligns each proposition against the
passage it came from (``align``), so that every record says which characters of the
document each statement stands for; ``start`` and ``end`` bound those spans.

* Never silent: an answer that does not parse or holds no proposition is asked again
  once, saying so; then the passage is kept as one chunk of its own text (a true slice)
  and counted. A call that fails (after the client's retries) fails its document.
  Each document's coverage (the share of its characters no proposition covers, and the
  propositions no span supports) is said in one line (``Session.notes``).
* Cheap: passages are asked at most ``--llm-concurrency`` at once; every answer is kept
  in ``--llm-cache`` by the SHA-256 of the model, the answer's bound and the whole
  prompt (so the passage), and a rerun asks nothing; ``Cost`` counts what was asked.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.llm.ledger import Ledger
from chunkd.llm.options import STRATEGIES_ASKING
from chunkd.model.chunk import NULL, Chunk
from chunkd.model.errors import LLMError, SettingsError
from chunkd.strategies.base import DocumentAtOnce, Strategy, register
from chunkd.strategies.recursive import Recursive

if TYPE_CHECKING:
    import threading

    from chunkd.embeddings.cache import DiskCache
    from chunkd.llm.client import ChatClient
    from chunkd.llm.context import Cost
    from chunkd.model.chunker import DocumentChunker
    from chunkd.model.length import LengthUnit
    from chunkd.strategies.base import SettingsView

NAME = "propositions"
STRATEGIES_ASKING[NAME] = ()

#: chunkd's prompt: Dense X Retrieval's proposition prompt (as LangChain's
#: ``propositional-retrieval`` template has it), plus the grouping into topic chunks.
PROMPT = """Decompose the content below into clear and simple propositions, ensuring \
they are interpretable out of context, then group them by topic.
1. Split compound sentences into simple sentences. Maintain the original phrasing \
from the content whenever possible.
2. For any named entity that is accompanied by additional descriptive information, \
separate this information into its own distinct proposition.
3. Decontextualize each proposition by adding necessary modifiers to nouns or entire \
sentences and replacing pronouns (e.g., "it", "he", "she", "they", "this", "that") with \
the full name of the entities they refer to.
4. State only what the content says: no proposition of your own.
5. Group the propositions into chunks, one chunk a topic, in the content's order; give \
each chunk a short title and a one-sentence summary.
Answer with JSON only, in this form:
{{"chunks": [{{"title": "...", "summary": "...", "propositions": ["...", "..."]}}]}}

Content:
{passage}"""
#: What a second request adds, after an answer that did not parse or held nothing.
AGAIN = """

Your previous answer was not JSON of that form, held no proposition, or was far longer \
than the content. Answer with the JSON object only."""
#: The answer's form, for servers that constrain their output to it (OpenAI's strict
#: mode wants every property required and no other).
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["chunks"],
    "properties": {"chunks": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "required": ["title", "summary", "propositions"],
        "properties": {"title": {"type": "string"}, "summary": {"type": "string"},
                       "propositions": {"type": "array", "items": {"type": "string"}}}}}}}
RESPONSE_FORMAT = {"type": "json_schema",
                   "json_schema": {"name": "propositions", "strict": True, "schema": SCHEMA}}
#: An answer's tokens: room for the passage restated, twice over, and the JSON around it.
ANSWER_BASE, ANSWER_PER_TOKEN = 256, 2
#: The most an answer may say: a title's and a summary's characters, and all its
#: propositions' against the passage's (restated, decontextualized: a name for each
#: pronoun).
TITLE_MOST, SUMMARY_MOST, RESTATED = 300, 2_000, 4
#: The least token overlap (Dice's coefficient of the words) that makes a sentence or
#: clause of the passage an approximate source of a rephrased proposition.
SUPPORT = 0.5
@functools.cache
def cache_key() -> str:
    """The ``prompt_cache_key`` of every request: they all begin with the same
    instructions (worked out when first asked: a plain run imports no hashing)."""
    import hashlib

    return "chunkd-" + hashlib.sha256(PROMPT.encode()).hexdigest()[:32]
_WORD = re.compile(r"\w+")
#: Where a sentence ends (the passage's sentences), and a clause within one.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+")


class Answered(NamedTuple):
    """One chunk as the LLM answered it; ``dropped``: the entries of its list of
    propositions that were no text (not a string, or blank), left out."""

    title: str
    summary: str
    propositions: list[str]
    dropped: int = 0


class Passage(NamedTuple):
    """A recursive chunk of the document, as the LLM is given it."""

    start: int
    end: int
    text: str


class Session(Ledger):
    """What the documents of a process share: the client, the cache, the cost, and the
    lines to say (its ``Ledger``: each document's coverage, and the cost at the end)."""

    def __init__(self, client: ChatClient, concurrency: int, cache: DiskCache | None) -> None:
        from chunkd.llm.context import Cost

        super().__init__()
        self.client, self.concurrency, self.cache = client, concurrency, cache
        self.cost: Cost = Cost()
        #: Made in this run, or used since it began: its cost is said, even when naught.
        self.in_run = True

    def lines(self) -> list[str]:
        if not (self.in_run or self.cost.calls or self.cost.reused):
            return []
        return [self.cost.line(self.client.endpoint.shown, f"--strategy {NAME}")]

    def clear(self) -> None:
        from chunkd.llm.context import Cost

        super().clear()
        self.cost, self.in_run = Cost(), False


@functools.lru_cache(maxsize=None)
def _session(url: str, model: str, concurrency: int, cache: str | None) -> Session:
    from chunkd.llm.client import ChatClient
    from chunkd.llm.options import context_cache

    return Session(ChatClient(url, model), concurrency,
                   None if cache is None else context_cache(cache))


def session(settings: SettingsView) -> Session | None:
    """The session of settings with ``--strategy propositions`` (None for another), one a
    process for the same endpoint, model, concurrency and cache."""
    if settings.strategy != NAME:
        return None
    from chunkd.llm.options import LLM_CACHE, LLM_CONCURRENCY, LLM_MODEL, LLM_URL

    return _session(settings[LLM_URL], settings[LLM_MODEL], settings[LLM_CONCURRENCY],
                    settings[LLM_CACHE])


@register
class Propositions(Strategy):
    """Passages (recursive chunks) turned by the LLM into propositions grouped by topic,
    each aligned back to its source in the document."""

    name = NAME
    units = ("chars", "tokens")
    # About 500 tokens: the prompt, the passage and an answer that restates it twice
    # fit a small model's 8,192 with room to spare.
    default_size = 2000
    overlaps = False
    streams = False
    fields = ("title", "summary", "propositions")

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        if settings.overlap:
            raise SettingsError(f"the {NAME} strategy's passages do not overlap: leave out "
                                "--overlap (or write --overlap 0)")
        Recursive.check(settings)

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        found = session(settings)
        assert found is not None
        return PropositionSplitter(Recursive.splitter(settings), found, settings.measure)


class PropositionSplitter(DocumentAtOnce):
    """Cuts a whole document into passages, then asks for their propositions."""

    def __init__(self, passages: DocumentChunker, session: Session, unit: LengthUnit) -> None:
        super().__init__()
        self.passages, self.session, self.unit = passages, session, unit

    def chunks(self, text: str) -> list[Chunk]:
        passages = [Passage(chunk.start, chunk.end, chunk.text)
                    for chunk in self.passages.feed(text) + self.passages.finish()]
        if not passages:
            return []
        groups = self.ask(passages)
        chunks: list[Chunk] = []
        for passage, answer in zip(passages, groups):
            if answer is None:
                chunks.append(self._kept(len(chunks), passage))
                continue
            for group in answer:
                propositions = tuple(align(proposition, passage)
                                     for proposition in group.propositions)
                spans = [(found["start"], found["end"]) for found in propositions
                         if found["start"] is not None]
                # No proposition supported: an empty span where its passage starts.
                start = min((span[0] for span in spans), default=passage.start)
                end = max((span[1] for span in spans), default=passage.start)
                joined = "\n".join(group.propositions)
                chunks.append(Chunk(len(chunks), start, end, self.unit.count(joined), joined,
                                    title=group.title, summary=group.summary,
                                    propositions=propositions))
        self._say(text, passages, groups, chunks)
        return chunks

    def _kept(self, index: int, passage: Passage) -> Chunk:
        """A passage the LLM gave no propositions: one chunk of its own text."""
        return Chunk(index, passage.start, passage.end, self.unit.count(passage.text),
                     passage.text, title=NULL, summary=NULL, propositions=(
                         {"text": passage.text, "start": passage.start,
                          "end": passage.end, "match": "exact"},))

    def _say(self, text: str, passages: list[Passage], groups: list[list[Answered] | None],
             chunks: list[Chunk]) -> None:
        """The document's lines: the passages kept as their own text, and coverage."""
        kept = sum(answer is None for answer in groups)
        if kept:
            self.session.notes.append(
                f"{kept} of {len(passages)} passages kept as their own text: the LLM's "
                "answer was not the JSON asked for, held no proposition, or was too long, "
                "twice")
        dropped = sum(group.dropped for answer in groups for group in answer or ())
        if dropped:
            self.session.notes.append(
                f"{dropped:,} entries of the LLM's lists of propositions left out: not "
                "text (a number, an object, null) or blank")
        covered = bytearray(len(text))
        made = unsupported = 0
        for chunk in chunks:
            for found in chunk.propositions or ():
                made += 1
                if found["start"] is None:
                    unsupported += 1
                else:
                    covered[found["start"]:found["end"]] = b"\1" * (found["end"] - found["start"])
        blank = [character.isspace() for character in text]
        total = len(text) - sum(blank)
        missed = sum(1 for is_blank, hit in zip(blank, covered) if not is_blank and not hit)
        share = 100 * missed / total if total else 0.0
        self.session.notes.append(
            f"--strategy {NAME}: {share:.1f} % of the document's characters (white space "
            f"aside) covered by no proposition; {unsupported:,} of {made:,} propositions "
            "supported by no span of it")

    def ask(self, passages: list[Passage]) -> list[list[Answered] | None]:
        """Each passage's groups (None: no answer parsed, twice), asked at most
        ``concurrency`` at once, from the cache where it has them; ``LLMError`` if a
        call failed."""
        import threading
        import time

        from chunkd.llm.context import _each

        session = self.session
        prompts = [PROMPT.format(passage=passage.text) for passage in passages]
        keys = [_key(session.client.name, _answer_tokens(passage.text), prompt)
                for passage, prompt in zip(passages, prompts)]
        by_key = {key: index for index, key in enumerate(keys)}
        answers: dict[bytes, list[Answered] | None] = {}
        failures: list[str] = []

        def one(index: int, prompt: str, given_up: threading.Event) -> list[Answered] | None:
            bound = _answer_tokens(passages[index].text)
            key = _key(session.client.name, bound, prompt)
            found = session.cache.get([key]).get(key) if session.cache is not None else None
            if found is not None:
                with session.cost.lock:
                    session.cost.reused += 1
                return parsed(found.decode("utf-8", "replace"), passages[index].text)
            completion = session.client.complete(prompt, cache_key(), bound, given_up,
                                                 RESPONSE_FORMAT)
            session.cost.add(completion)
            if session.cache is not None:
                session.cache.put([(key, completion.text.encode("utf-8", "surrogatepass"))])
            return parsed(completion.text, passages[index].text)

        def asked(key: bytes, given_up: threading.Event) -> None:
            index = by_key[key]
            groups = one(index, prompts[index], given_up)
            if groups is None:  # asked again once, saying why
                groups = one(index, prompts[index] + AGAIN, given_up)
            answers[key] = groups

        started = time.monotonic()
        try:
            _each(list(dict.fromkeys(keys)), asked, session.concurrency, failures,
                  stop_at_failure=True)
        finally:
            with session.cost.lock:
                session.cost.seconds += time.monotonic() - started
        if failures:
            raise LLMError(f"--strategy {NAME}: a passage's request failed: {failures[0]}")
        return [answers[key] for key in keys]


def _key(model: str, bound: int, prompt: str) -> bytes:
    import hashlib

    return hashlib.sha256(f"{NAME}\0{model}\0{bound}\0".encode()
                          + prompt.encode("utf-8", "surrogatepass")).digest()


def _answer_tokens(passage: str) -> int:
    from chunkd.units import resolve

    return ANSWER_BASE + ANSWER_PER_TOKEN * resolve("cl100k_base").count(passage)


def parsed(answer: str, passage: str) -> list[Answered] | None:
    """The groups an answer for ``passage`` holds: its JSON (alone, or the object within
    prose or a code fence around it), each group's propositions the non-blank strings
    (what else its list holds is counted in ``dropped``); None if it holds no JSON of
    that form, no proposition, or more than was asked (``too_long``)."""
    from chunkd.llm.client import writable

    value = _json_in(answer)
    chunks = value.get("chunks") if isinstance(value, dict) else None
    if not isinstance(chunks, list):
        return None
    groups = []
    for chunk in chunks:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("propositions"), list):
            return None
        propositions = [" ".join(writable(text).split()) for text in chunk["propositions"]
                        if isinstance(text, str) and text.strip()]
        if propositions:
            title, summary = chunk.get("title"), chunk.get("summary")
            groups.append(Answered(writable(title).strip() if isinstance(title, str) else "",
                                   writable(summary).strip() if isinstance(summary, str)
                                   else "", propositions,
                                   len(chunk["propositions"]) - len(propositions)))
    return None if not groups or too_long(groups, passage) else groups


def too_long(groups: list[Answered], passage: str) -> bool:
    """Whether an answer says more than was asked of ``passage``: a title or a summary
    past its bound, or propositions that together are longer than ``RESTATED`` times
    the passage (a server that ignores the answer's token bound could otherwise fill
    records with up to a MiB of text each)."""
    said = sum(len(text) for group in groups for text in group.propositions)
    return (said > RESTATED * len(passage) + 1024
            or any(len(group.title) > TITLE_MOST or len(group.summary) > SUMMARY_MOST
                   for group in groups))


def _json_in(answer: str) -> object:
    """The JSON value of ``answer``, else of its text from the first ``{`` to the last
    ``}``; None if neither parses."""
    import json

    text = answer.strip()
    for candidate in (text, text[text.find("{"):text.rfind("}") + 1]):
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return None


def align(proposition: str, passage: Passage) -> dict[str, Any]:
    """The span of the document ``proposition`` was drawn from, within its passage:
    ``"exact"`` where its words (\\w+ runs, case folded: white space and punctuation
    aside) appear in that order, consecutively, in the passage (the first such place,
    from its first word to its last); else ``"approximate"``, the passage's sentence or
    clause whose words overlap the proposition's most (Dice's coefficient of the two
    multisets, as ``score``) where that is at least ``SUPPORT``; else no span."""
    words = [(match.group().casefold(), match.start(), match.end())
             for match in _WORD.finditer(passage.text)]
    wanted = [word.casefold() for word in _WORD.findall(proposition)]
    found: dict[str, Any] = {"text": proposition, "start": None, "end": None, "match": None}
    if not wanted:
        return found
    tokens = [word for word, _, _ in words]
    for at in range(len(tokens) - len(wanted) + 1):
        if tokens[at] == wanted[0] and tokens[at:at + len(wanted)] == wanted:
            found.update(start=passage.start + words[at][1],
                         end=passage.start + words[at + len(wanted) - 1][2], match="exact")
            return found
    want = Counter(wanted)
    best, span = 0.0, None
    for start, end in _pieces(passage.text):
        theirs = Counter(word for word, first, last in words if start <= first and last <= end)
        if theirs:
            score = 2 * sum((want & theirs).values()) / (len(wanted) + sum(theirs.values()))
            if score > best:
                best, span = score, (start, end)
    if span is not None and best >= SUPPORT:
        found.update(start=passage.start + span[0], end=passage.start + span[1],
                     match="approximate", score=round(best, 3))
    return found


def _pieces(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s sentences, then of their clauses, white space stripped."""
    sentences = _spans(text, 0, len(text), _SENTENCE_END)
    clauses = [clause for start, end in sentences
               for clause in _spans(text, start, end, _CLAUSE_END)]
    return sentences + [clause for clause in clauses if clause not in sentences]


def _spans(text: str, start: int, end: int, cut: re.Pattern) -> list[tuple[int, int]]:
    spans, at = [], start
    for match in cut.finditer(text, start, end):
        spans.append((at, match.start()))
        at = match.end()
    spans.append((at, end))
    stripped = []
    for first, last in spans:
        piece = text[first:last]
        lead = len(piece) - len(piece.lstrip())
        if piece.strip():
            stripped.append((first + lead, first + len(piece.rstrip())))
    return stripped
