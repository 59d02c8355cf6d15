"""The code strategy: source code cut by its syntax tree (tree-sitter).

The language comes from ``--language`` (LangChain's names: python, js, ts, go, rust,
java, c, cpp), else the document's name's extension (``begin``), else a shebang line;
each is parsed by its grammar package (``tree-sitter-python``, ...: wheels that carry
the compiled grammar, so nothing is downloaded). A document in no known language is
cut as text, by the recursive splitter with chunkd's separators; one in a known
language whose grammar is not installed is an ``InputError`` naming the package.

The file is parsed whole (buffered in ``feed``, cut in ``finish``). The cutting, in the
spirit of semantic-text-splitter's ``CodeSplitter``: the pieces of a level (the
file's top-level nodes, then a node's children) tile the text, a node's leading
comments (and Rust attributes, JavaScript decorators) glued to it; as many pieces as fit
the size make a chunk. A piece over the size is cut at its children; in a container
(the file, a block, a class body) the chunk open before it is closed first, so that a
definition starts a chunk, while in a construct (a function, a class) the header is
carried into the chunk of its body. A leaf over the size (a long string) is cut by
the recursive splitter with its language's separators. So a definition that fits is
never split, and chunks are whole lines wherever the syntax allows: the white space
between two pieces goes to the first, a line's indentation to the second.

Chunks tile the document (with ``--overlap``, each also takes whole lines from the end
of the one before, at most the overlap and within the size); offsets are code points,
converted from tree-sitter's UTF-8 byte offsets.

In the common case (sizes in code points, no ``embed_text`` prefix) the parse and the
cut are compiled (``chunkd.kernel._code``, on tree-sitter's C runtime): ``CodeDocument`` here is
its twin, and what runs wherever the compiled walk does not (``code_walk``).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from functools import cached_property, lru_cache
from itertools import accumulate
from operator import itemgetter
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TypeAlias

from chunkd.kernel import chosen
from chunkd.model.chunk import Chunk
from chunkd.model.errors import SettingsError
from chunkd.options import Flag, Option, Record, number_value, register_option, whole
from chunkd.model.patterns import deferred
from chunkd.model.chunker import DocumentChunker, Source
from chunkd.strategies.base import Strategy, register
from chunkd.strategies.recursive import (KEEP, LANGUAGE, SEPARATOR_LIST, SEPARATOR_REGEX,
                                         STRIP_WHITESPACE, compile_separator)
from chunkd.units import CHARS

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Query

    from chunkd.kernel._code import CodeWalk
    from chunkd.kernel.chosen import RecursiveSplitter
    from chunkd.strategies.base import SettingsView
    from chunkd.model.length import LengthUnit


class Grammar:
    """A language chunkd parses: its name in records, the package that carries its
    grammar (and the module and function giving it), the LangChain language whose
    separators cut an oversized leaf, the file name extensions and shebang
    interpreters that name it, its definitions' node types, and the keywords that each
    of its definitions holds as a token of its own (none where some definition has
    none, as a JavaScript method). Each is one of ``GRAMMARS``: compared and hashed by
    identity, cheaply (the parser's caches are keyed by it)."""

    def __init__(self, name: str, package: str, function: str, separators: str,
                 extensions: tuple[str, ...], interpreters: tuple[str, ...],
                 definitions: frozenset[str], keywords: tuple[str, ...] = ()) -> None:
        self.name = name
        self.package = package
        self.function = function
        self.separators = separators
        self.extensions = extensions
        self.interpreters = interpreters
        self.definitions = definitions
        self.keywords = keywords

    def __repr__(self) -> str:
        return f"Grammar({self.name!r})"

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")


_JAVASCRIPT = frozenset({"function_declaration", "generator_function_declaration",
                         "class_declaration", "method_definition"})
_TYPESCRIPT = _JAVASCRIPT | {"abstract_class_declaration", "interface_declaration",
                             "enum_declaration", "internal_module", "module"}
_C = frozenset({"function_definition", "struct_specifier", "union_specifier",
                "enum_specifier"})

#: The languages, by the name records give them.
GRAMMARS = {grammar.name: grammar for grammar in (
    Grammar("python", "tree-sitter-python", "language", "python", (".py", ".pyi", ".pyw"),
            ("python",), frozenset({"function_definition", "class_definition"}),
            ("def", "class")),
    Grammar("javascript", "tree-sitter-javascript", "language", "js",
            (".js", ".mjs", ".cjs", ".jsx"), ("node", "nodejs"), _JAVASCRIPT),
    Grammar("typescript", "tree-sitter-typescript", "language_typescript", "ts",
            (".ts", ".mts", ".cts"), ("ts-node",), _TYPESCRIPT),
    Grammar("tsx", "tree-sitter-typescript", "language_tsx", "ts", (".tsx",), (),
            _TYPESCRIPT),
    Grammar("go", "tree-sitter-go", "language", "go", (".go",), (),
            frozenset({"function_declaration", "method_declaration", "type_declaration"}),
            ("func", "type")),
    Grammar("rust", "tree-sitter-rust", "language", "rust", (".rs",), (),
            frozenset({"function_item", "struct_item", "enum_item", "union_item",
                       "trait_item", "impl_item", "mod_item", "macro_definition"})),
    Grammar("java", "tree-sitter-java", "language", "java", (".java",), (),
            frozenset({"class_declaration", "interface_declaration", "enum_declaration",
                       "record_declaration", "annotation_type_declaration",
                       "method_declaration", "constructor_declaration"})),
    Grammar("c", "tree-sitter-c", "language", "c", (".c", ".h"), (), _C),
    Grammar("cpp", "tree-sitter-cpp", "language", "cpp",
            (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp"), (),
            _C | {"class_specifier", "namespace_definition"}),
)}
#: ``--language`` (LangChain's names) -> the grammar.
BY_LANGUAGE_OPTION = {"python": "python", "js": "javascript", "ts": "typescript", "go": "go",
                      "rust": "rust", "java": "java", "c": "c", "cpp": "cpp"}
BY_EXTENSION = {extension: grammar for grammar in GRAMMARS.values()
                for extension in grammar.extensions}
BY_INTERPRETER = {interpreter: grammar for grammar in GRAMMARS.values()
                  for interpreter in grammar.interpreters}

#: Nodes whose children are statements or members: a chunk open before an oversized
#: one of its children is closed (a definition starts a chunk). Any other node is a
#: construct, whose header goes into the chunk of its body.
CONTAINERS = frozenset({
    "module", "program", "source_file", "translation_unit", "block", "statement_block",
    "class_body", "declaration_list", "field_declaration_list", "enum_variant_list",
    "interface_body", "enum_body", "annotation_type_body", "constructor_body",
    "compound_statement", "enumerator_list", "switch_body", "switch_block", "ERROR"})
#: Nodes that belong to the node after them (on the next line at most).
LEADING = frozenset({"comment", "line_comment", "block_comment", "decorator",
                     "attribute_item", "marker_annotation", "annotation"})
#: The fields of a node that wraps a definition (a decorated or exported one), looked
#: at in this order.
WRAPPING = ("definition", "declaration")
#: The kinds of level the cut goes down: a container's children are statements or
#: members; a construct's, its header and body; a group's, leading comments and the
#: node they lead.
CONTAINER, CONSTRUCT, GROUP = range(3)
#: A node of more children (a generated data table) is cut a batch of this many at a
#: time: a piece for each child at once took about 150 bytes of memory for each byte
#: of a table of small numbers.
MOST_CHILDREN = 4096
#: A keyword looked up in the tree costs about as much as this many nodes visited by a
#: query (the standard library: 7.5 microseconds a keyword, 175 nanoseconds a node).
KEYWORD_NODES = 40
#: The longest symbol a record gives, in code points.
SYMBOL_LENGTH = 200

_SHEBANG = deferred(r"#![ \t]*(?:\S*/)?(?:env[ \t]+(?:-\S+[ \t]+)*)?([\w.+-]+)")
_ANNOTATIONS = deferred(r"^(?:(?:@|#\[)\S*(?:\([^)]*\))?\]?\s+)+")
_NOT_SPACE = deferred(r"\S")
_END = itemgetter(1)   # a piece's end
#: Where a Chunk holds its symbols and defines (the compiled walk's records set them).
_SYMBOLS_FIELD, _DEFINES_FIELD = Chunk._fields.index("symbols"), Chunk._fields.index("defines")


#: The largest source file parsed by default, in bytes of UTF-8: a file is held whole
#: with its syntax tree, about 75 bytes of memory a byte at worst (a generated table of
#: small numbers; see docs/code.md), so a worker stays under 2 GB.
SOURCE_BYTES = 16 * 2**20
MAX_SOURCE_BYTES = register_option(Option[int](
    SOURCE_BYTES, "the largest source file the code strategy parses",
    name="max_source_bytes", check=whole(1), record=Record.NEVER,
    applies=lambda kind: kind.name == "code",
    refusal="{option} is for --strategy code, not {strategy}", flags=(
        Flag("--max-source-bytes", "code: parse a file of at most N bytes of UTF-8, held "
                                   "whole with its syntax tree; a larger one is an error "
                                   f"(default: {SOURCE_BYTES}, 16 MiB)", metavar="N",
             parse=number_value),)))


class GrammarMissing(Exception):
    """A language's grammar package is not installed; the message names it."""


def grammar_named(name: str | None, option: str | None) -> Grammar | None:
    """The grammar for a document: ``--language`` (the name's extension may refine
    TypeScript to TSX), else the name's extension; None if neither tells."""
    extension = None
    if isinstance(name, str) and "." in name.rsplit("/", 1)[-1]:
        extension = BY_EXTENSION.get("." + name.rsplit(".", 1)[-1].lower())
    if option is not None:
        picked = GRAMMARS[BY_LANGUAGE_OPTION[option]]
        if picked.name == "typescript" and extension is not None and extension.name == "tsx":
            return extension
        return picked
    return extension


def grammar_of_shebang(text: str) -> Grammar | None:
    """The grammar a ``#!`` first line names (``#!/usr/bin/env python3``), if any."""
    match = _SHEBANG.match(text)
    if match is None:
        return None
    interpreter = re.sub(r"[\d.]+$", "", match.group(1))
    return BY_INTERPRETER.get(interpreter)


@lru_cache(maxsize=None)
def parser(grammar: Grammar) -> Parser:
    """A parser for ``grammar``, its package imported once a process."""
    import importlib

    try:
        from tree_sitter import Language, Parser

        module = importlib.import_module(grammar.module)
    except ImportError:
        raise GrammarMissing(f"{grammar.name} needs its tree-sitter grammar: "
                             f"pip install 'tree-sitter>=0.25' '{grammar.package}'") from None
    return Parser(Language(getattr(module, grammar.function)()))


@lru_cache(maxsize=None)
def kind_ids(grammar: Grammar, names: frozenset[str]) -> frozenset[int]:
    """The ids of ``grammar``'s node kinds named ``names``: a node's ``kind_id`` costs
    less to read and look up than its ``type``, the name of that id."""
    language = parser(grammar).language
    assert language is not None   # made with it
    # ERROR's id is past node_kind_count: looked up by its name
    named = {kind for name in names if (kind := language.id_for_node_kind(name, True)) is not None}
    return frozenset(kind for kind in range(language.node_kind_count)
                     if language.node_kind_for_id(kind) in names) | named


@lru_cache(maxsize=None)
def field_ids(grammar: Grammar, names: tuple[str, ...]) -> tuple[int, ...]:
    """The ids of ``grammar``'s fields named ``names`` (those it has), in that order."""
    language = parser(grammar).language
    assert language is not None   # made with it
    return tuple(field for name in names
                 if (field := language.field_id_for_name(name)) is not None)


@lru_cache(maxsize=None)
def code_walk(grammar: Grammar) -> CodeWalk | None:
    """The compiled walk for ``grammar``; None where the Python ``CodeDocument`` cuts
    alone: the twin asked for (``CHUNKD_PUREPYTHON=1``), the walk not built, or a
    grammar of an ABI version the vendored runtime does not read."""
    if chosen.CodeWalk is None:
        return None
    import importlib

    parser(grammar)   # installed (else GrammarMissing)
    language = getattr(importlib.import_module(grammar.module), grammar.function)()
    return compiled_walk(chosen.CodeWalk, grammar, language)


def compiled_walk(walk: type[CodeWalk], grammar: Grammar, language: object) -> CodeWalk | None:
    """``grammar``'s walk of the class ``walk`` on ``language`` (the grammar package's
    capsule); None if the runtime does not read its ABI version."""
    kinds = bytearray(1 << 16)   # a flag byte for each node kind id
    for flag, names in ((walk.LEADING, LEADING), (walk.CONTAINER, CONTAINERS),
                        (walk.DEFINITION, grammar.definitions)):
        for kind in kind_ids(grammar, names):
            kinds[kind] |= flag
    try:
        return walk(language, bytes(kinds), field_ids(grammar, WRAPPING),
                    tuple(word.encode() for word in grammar.keywords), MOST_CHILDREN,
                    KEYWORD_NODES)
    except ValueError:
        return None


@register
class Code(Strategy):
    """Source code cut by its syntax tree (tree-sitter): definitions whole where they
    fit, with their comments and decorators; ``symbols`` and ``language`` on every
    chunk."""

    name = "code"
    units = ("chars", "tokens")
    default_size = 1000
    fields = ("symbols", "defines", "language")
    streams = False
    embeds = True
    include = tuple(sorted("*" + extension for extension in BY_EXTENSION))

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        language = settings[LANGUAGE]
        if language is not None and language not in BY_LANGUAGE_OPTION:
            raise SettingsError(f"the code strategy has no grammar for {language}; it parses "
                                f"{', '.join(BY_LANGUAGE_OPTION)}")
        for option, spelling in ((SEPARATOR_LIST, "--separators"),
                                 (SEPARATOR_REGEX, "--separator-regex"),
                                 (KEEP, "--keep-separator"), (STRIP_WHITESPACE, "--no-strip")):
            if option in settings.set_options():
                raise SettingsError(f"the code strategy takes no {spelling}: its chunks are "
                                    "whole syntax nodes and lines, and a leaf too long for "
                                    "the size is cut with its language's separators")
        if language is not None:
            try:
                parser(GRAMMARS[BY_LANGUAGE_OPTION[language]])
            except GrammarMissing as error:
                raise SettingsError(str(error)) from None

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        return CodeSplitter(settings)


#: Consecutive text of a level: its start and end in code points, and its nodes (one
#: node, or leading comments and the node they lead; none for white space). A plain
#: tuple: a document makes one for every node it looks at.
Piece: TypeAlias = "tuple[int, int, tuple[Node, ...]]"


class Outline(NamedTuple):
    """A document's definitions, in order (by start, an enclosing one first), in code
    points: where each starts and ends, where its code ends (before the comments that
    end it), the index of the one enclosing it (-1: none), its symbol and its qualified
    symbol (those of the definitions enclosing it, then its own, joined by " > "); and
    the symbols of those enclosing it and its own, outermost first, with the first of
    their code ends (before it, all of them name a point within the definition)."""

    starts: list[int]
    ends: list[int]
    code_ends: list[int]
    parents: list[int]
    symbols: list[str]
    qualified: list[str]
    chains: list[tuple[str, ...]]
    chain_ends: list[int]

    @classmethod
    def made(cls, starts: list[int], ends: list[int], code_ends: list[int],
             parents: list[int], symbols: list[str]) -> Outline:
        """The outline of these definitions, their qualified symbols and chains made."""
        qualified: list[str] = []
        chains: list[tuple[str, ...]] = []
        chain_ends: list[int] = []
        for symbol, parent, code_end in zip(symbols, parents, code_ends):
            if parent < 0:
                qualified.append(symbol)
                chains.append((symbol,))
                chain_ends.append(code_end)
            else:
                qualified.append(f"{qualified[parent]} > {symbol}")
                chains.append(chains[parent] + (symbol,))
                chain_ends.append(min(chain_ends[parent], code_end))
        return cls(starts, ends, code_ends, parents, symbols, qualified, chains, chain_ends)


class _CutLevel:
    """A level of the cut on the stack: its pieces, its kind, whether it is a
    definition's (whose header is a signature), the next piece to place (``at``), and
    whether a piece of it was cut (``past``: a construct is past its header);
    ``header``: whether it is within a definition's header (its parameters, decorators:
    all signature, never body); ``body_start``: where a definition's body starts (the
    byte offset of its child by field ``body``, or of the definition it wraps; -1: none,
    nothing is header)."""

    __slots__ = ("pieces", "kind", "definition", "at", "past", "rest", "end", "header",
                 "body_start")

    def __init__(self, pieces: list[Piece], kind: int, definition: bool,
                 rest: Iterator[tuple[list[Node], int | None]] | None = None,
                 end: int = 0, header: bool = False, body_start: int = -1) -> None:
        self.pieces = pieces
        self.kind = kind
        self.definition = definition
        self.at = 0
        self.past = False
        self.header = header
        self.body_start = body_start
        #: The batches of children still to come, each with where the one after starts
        #: (``_batches``), and where the last ends; None: all are in ``pieces``.
        self.rest = rest
        self.end = end


class Offsets:
    """Byte offsets in the UTF-8 text <-> code point offsets, through checkpoints every
    ``STEP`` bytes: a conversion decodes at most that much, and none in a block of
    ASCII (most blocks of code with a few non-ASCII strings or comments)."""

    STEP = 1024

    def __init__(self, text: str, data: bytes) -> None:
        self.text, self.data = text, data
        self.ascii = len(text) == len(data)
        self.bytes_at, self.points_at = [0], [0]
        if self.ascii:
            return
        at = self.STEP
        while at < len(data):
            while data[at] & 0xC0 == 0x80:  # back to a character's first byte
                at -= 1
            self.points_at.append(self.points_at[-1] + len(_decoded(data[self.bytes_at[-1]:at])))
            self.bytes_at.append(at)
            at += self.STEP
        self.bytes_at.append(len(data))
        self.points_at.append(len(text))
        #: Whether the block from each checkpoint to the next is ASCII (the last, empty),
        #: and so converts by a shift: its bytes minus its code points before it.
        self.plain = [after - before == points_after - points_before for
                      before, after, points_before, points_after in
                      zip(self.bytes_at, self.bytes_at[1:], self.points_at, self.points_at[1:])]
        self.plain.append(True)
        self.shift = [byte - point for byte, point in zip(self.bytes_at, self.points_at)]

    def point(self, byte: int) -> int:
        if self.ascii:
            return byte
        mark = bisect_right(self.bytes_at, byte) - 1
        if self.plain[mark]:
            return byte - self.shift[mark]
        return self.points_at[mark] + len(_decoded(self.data[self.bytes_at[mark]:byte]))

    def points(self, bytes_: list[int]) -> list[int]:
        """``point`` of each (the same list for ASCII text; a shift in ASCII blocks, with
        no call: a document converts every node's offsets)."""
        if self.ascii:
            return bytes_
        at, plain, shift, point = self.bytes_at, self.plain, self.shift, self.point
        return [byte - shift[mark] if plain[mark := bisect_right(at, byte) - 1] else point(byte)
                for byte in bytes_]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # the API may give lone surrogates


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


class CodeSplitter:
    """One document at a time: buffered whole, parsed and cut in ``finish``."""

    def __init__(self, settings: SettingsView) -> None:
        self.size = settings.chunk_size
        self.overlap = settings.chunk_overlap
        self.unit: LengthUnit = settings.measure
        self.chars = self.unit is CHARS   # lengths add up: a chunk's is its end - start
        self.option = settings[LANGUAGE]
        self.most_bytes = settings[MAX_SOURCE_BYTES]
        #: The recursive splitter that cuts a leaf over the size, a language's (None:
        #: chunkd's separators), made once and resized (made, it cost as much as the cut).
        self.leaves: dict[Grammar | None, RecursiveSplitter] = {}
        self.prefixes = None
        if settings.embed_text:
            from chunkd.strategies.markdown import EmbedPrefix

            self.prefixes = EmbedPrefix(settings)
        self.begin(Source())

    def begin(self, source: Source) -> None:
        """Start a document: its grammar from ``--language`` or its name (a missing
        grammar package is this document's ``InputError``)."""
        self.source = source
        self.held: list[str] = []   # the document's text so far
        self.held_bytes = 0
        self.grammar = grammar_named(source.name, self.option)
        if self.grammar is not None:
            self._check_installed(self.grammar)

    def _check_installed(self, grammar: Grammar) -> None:
        try:
            parser(grammar)
        except GrammarMissing as error:
            self._fail(str(error))

    def _fail(self, what: str) -> NoReturn:
        """This document's ``InputError``, naming it; what it held is dropped."""
        from chunkd.inputs.readers import InputError, display_name

        where = display_name(self.source.name) if isinstance(self.source.name, str) \
            else "stdin" if self.source.name is None else str(self.source.name)
        self.held = []
        raise InputError(f"{where}: {what}") from None

    def feed(self, text: str) -> list[Chunk]:
        self.held_bytes += len(text) if text.isascii() else len(_encoded(text))
        if self.held_bytes > self.most_bytes:
            self._fail(f"over --max-source-bytes {self.most_bytes}: the code strategy "
                       "holds a source file whole with its syntax tree; raise the limit, "
                       "or cut it with --strategy recursive --language NAME")
        self.held.append(text)
        return []

    def finish(self) -> list[Chunk]:
        text = "".join(self.held)
        self.held = []
        grammar = self.grammar or grammar_of_shebang(text)
        if grammar is not None and self.grammar is None:
            self._check_installed(grammar)
        blank = text.isspace() or not text   # (a strip would copy the text)
        chunks = [] if blank else CodeDocument(self, text, grammar).chunks()
        self.begin(Source())
        return chunks


class CodeDocument:
    """The cutting of one document's text."""

    def __init__(self, splitter: CodeSplitter, text: str, grammar: Grammar | None) -> None:
        self.splitter = splitter
        self.text = text
        self.grammar = grammar
        self.size = splitter.size
        self.count = splitter.unit.count
        #: Sizes in code points and no embed_text prefix: a chunk fits if end - start
        #: does (the cut asks this of tens of thousands of spans a document set).
        self.bare = splitter.chars and splitter.prefixes is None
        self.path = splitter.source.name if isinstance(splitter.source.name, str) else None
        self.cuts: list[int] = []           # the chunks' starts, in order
        self.prefixes_at: dict[int, tuple[str, int]] = {}
        self.code_ends: dict[int, int] = {}                 # by node id
        self.leading = frozenset() if grammar is None else kind_ids(grammar, LEADING)
        self.containers = frozenset() if grammar is None else kind_ids(grammar, CONTAINERS)
        self.definitions = frozenset() if grammar is None \
            else kind_ids(grammar, grammar.definitions)
        self.wrapping = () if grammar is None else field_ids(grammar, WRAPPING)
        #: A definition's body (or the definition it wraps): its header is what is before.
        self.bodies = () if grammar is None else field_ids(grammar, ("body",)) + self.wrapping
        self.data = _encoded(text)

    @cached_property
    def offsets(self) -> Offsets:
        return Offsets(self.text, self.data)

    @cached_property
    def root(self) -> Node | None:
        """The syntax tree's root (the tree held with it); None: no grammar."""
        if self.grammar is None:
            return None
        self.tree = parser(self.grammar).parse(self.data)
        return self.tree.root_node

    # --- sizes ---------------------------------------------------------------------------

    def prefix(self, start: int) -> tuple[str, int]:
        """The ``embed_text`` prefix of a chunk starting at ``start``, and its length."""
        if self.splitter.prefixes is None:
            return "", 0
        known = self.prefixes_at.get(start)
        if known is None:
            headings = ((self.path,) if self.path else ()) + self.symbols_at(start)
            prefix = self.splitter.prefixes.fitted(headings)
            known = self.prefixes_at[start] = (prefix, self.count(prefix) if prefix else 0)
        return known

    def fits(self, start: int, end: int) -> bool:
        if self.bare:
            return end - start <= self.size
        prefix, length = self.prefix(start)
        if self.splitter.chars:
            return end - start + length <= self.size
        return self.count(prefix + self.text[start:end]) <= self.size

    def furthest(self, start: int, pieces: list[Piece], first: int) -> int:
        """The most pieces from ``first`` on that fit in a chunk from ``start``: the
        index after the last (``first`` if none fits). In code points a chunk fits up to
        an end, found by bisection; in tokens, galloping, then bisection."""
        if self.bare:
            return bisect_right(pieces, start + self.size, first, key=_END)
        if self.splitter.chars:
            return bisect_right(pieces, start + self.size - self.prefix(start)[1], first,
                                key=_END)
        if not self.fits(start, pieces[first][1]):
            return first
        good, step, bad = first + 1, 1, len(pieces) + 1
        while good < len(pieces):
            probe = min(good + step, len(pieces))
            if self.fits(start, pieces[probe - 1][1]):
                good, step = probe, step * 2
            else:
                bad = probe
                break
        while bad - good > 1:
            middle = (good + bad) // 2
            if self.fits(start, pieces[middle - 1][1]):
                good = middle
            else:
                bad = middle
        return good

    # --- cutting -------------------------------------------------------------------------

    def chunks(self) -> list[Chunk]:
        walk = code_walk(self.grammar) if self.grammar is not None and self.bare else None
        if walk is not None:
            self.cuts, fields = walk.cut(self.text, self.data, self.size, self.leaf_starts,
                                         _symbol)
            if self.splitter.overlap:   # chunks moved back over lines: cut in Python
                self.outline = Outline(*fields)
                return self.records()
            assert self.grammar is not None   # (a walk is a grammar's)
            return walk.records(self.text, self.cuts, fields,
                                Chunk(0, 0, 0, 0, "", language=self.grammar.name),
                                _SYMBOLS_FIELD, _DEFINES_FIELD)
        end = len(self.text)
        if self.root is not None and self.root.child_count:
            opened = self.cut(self.level(self.root, 0, end, CONTAINER, False, False))
        else:
            opened = self.cut_leaf(None, 0, end)
        if opened is not None:
            self.cuts.append(opened)
        return self.records()

    def level(self, node: Node, start: int, end: int, kind: int, definition: bool,
              header: bool) -> _CutLevel:
        """The level of a node's children (glued to their leading comments) from
        ``start`` to ``end``: a batch of ``MOST_CHILDREN`` at a time, so that a node of
        millions (a generated table) takes little memory beside its tree."""
        body_start = -1
        if definition:
            for field in self.bodies:
                body = node.child_by_field_id(field)
                if body is not None:
                    body_start = body.start_byte
                    break
        if node.child_count <= MOST_CHILDREN:
            return _CutLevel(self.tiled(node.children, start, end, glue=True), kind, definition,
                          header=header, body_start=body_start)
        batches = _batches(node)
        children, after = next(batches)
        level = _CutLevel([], kind, definition, rest=batches, end=end, header=header,
                       body_start=body_start)
        level.pieces = self.tiled(children, start, self.batch_end(level, after), glue=True)
        return level

    def batch_end(self, level: _CutLevel, after: int | None) -> int:
        """Where a batch of a level's children ends: where the next starts (``after``,
        a byte offset), else at the level's end."""
        return level.end if after is None else self.offsets.point(after)

    def cut(self, top: _CutLevel) -> int | None:
        """Close chunks over the file's pieces, cutting a piece over the size at its
        children, down the tree with a stack of levels (no recursion: a file nested
        thousands deep is cut like any other); returns where the chunk left open
        starts.

        ``body``: whether the open chunk holds more than signatures and comments;
        ``signature``: whether it holds a definition's header (``def f(...):``, its
        decorators) carried down into its body. A chunk is closed before a
        piece over the size in a container only if it holds body or nothing but
        comments, and before a piece that fits alone if it holds body or no signature:
        so a signature begins the chunk of its body, never a chunk of its own, while
        leading comments may close alone before a definition that then stays whole. A
        definition's child before its body (its parameters, a decorator) cut down is
        still signature: only its body, or what follows, is body."""
        levels = [top]
        opened: int | None = None
        body = signature = False
        while levels:
            level = levels[-1]
            pieces, at = level.pieces, level.at
            if at == len(pieces) and level.rest is not None:   # its next batch
                batch = next(level.rest, None)
                if batch is not None:
                    level.pieces = self.tiled(batch[0], pieces[-1][1],
                                              self.batch_end(level, batch[1]), glue=True)
                    level.at = 0
                    continue
            if at == len(pieces):
                levels.pop()
                if levels:
                    levels[-1].at += 1
                    if level.header:   # a header cut down is still signature
                        signature = True
                    else:
                        levels[-1].past = True
                        body = True
                continue
            start = pieces[at][0] if opened is None else opened
            after = self.furthest(start, pieces, at)
            if after > at:
                opened, level.at = start, after
                if level.kind != CONSTRUCT:
                    body = body or self.has_code(pieces, at, after)
                elif level.past:
                    body = True
                elif level.definition or level.header:
                    signature = True
                continue
            piece = pieces[at]
            alone = opened is not None and self.fits(piece[0], piece[1])
            # Over the size only by its white space: alone, or (fitting alone) after
            # what is open, where a definition goes with its class's signature.
            trimmed = self.trimmed(piece, opened if alone else None)
            if trimmed is not None:
                pieces[at:at + 1] = trimmed
                continue
            # room: the piece fits alone, or not even its first two lines fit with the open chunk
            room = alone or opened is not None and not self.fits(opened, self.line_end(piece))
            if opened is not None and (
                    body or room and not signature if level.kind == CONTAINER
                    else room and (body or not signature)):
                opened = self.closed(opened, pieces, at, alone)
                body = signature = False
                if alone:   # it starts the next chunk
                    continue
            start, end, nodes = piece
            # a definition's child before its body (parameters, decorators) is header
            header = level.header or nodes != () and nodes[-1].start_byte < level.body_start
            if len(nodes) > 1:   # leading nodes of a construct (decorators) are its header
                levels.append(_CutLevel(self.tiled(list(nodes), start, end),
                                     GROUP if level.kind == CONTAINER else CONSTRUCT,
                                     level.definition, header=header,
                                     body_start=level.body_start))
            elif nodes and nodes[0].child_count:
                levels.append(self.level(
                    nodes[0], start, end,
                    CONTAINER if nodes[0].kind_id in self.containers else CONSTRUCT,
                    self.is_definition(piece), header))
            else:   # a leaf, or white space
                opened = self.cut_leaf(opened, start, end)
                if header:
                    signature = True
                else:
                    body = level.past = True
                level.at += 1
        return opened

    def line_end(self, piece: Piece) -> int:
        """The end of the line after the first that holds code in a piece (a
        signature's and its body's first line; the piece's end at most)."""
        start, end, _ = piece
        found = _NOT_SPACE.search(self.text, start, end)
        line = -1 if found is None else self.text.find("\n", found.start(), end)
        if line >= 0:
            line = self.text.find("\n", line + 1, end)
        return end if line < 0 else line + 1

    def has_code(self, pieces: list[Piece], first: int, after: int) -> bool:
        """Whether ``pieces[first:after]`` hold more than leading nodes (comments,
        decorators, attributes) and white space (looked at from the end: most pieces
        are code)."""
        leading = self.leading
        for index in range(after - 1, first - 1, -1):
            nodes = pieces[index][2]
            if nodes and (len(nodes) > 1 or nodes[0].kind_id not in leading):
                return True
        return False

    def closed(self, opened: int, pieces: list[Piece], at: int, alone: bool) -> int | None:
        """Close the chunk open from ``opened`` before ``pieces[at]``; returns where the
        next starts: at the leading nodes that end it after other content (a section
        comment goes with what follows: with the piece if it fits ``alone`` and they fit
        together, else with its first two lines), else None (at the piece)."""
        back = at
        while back > 0 and pieces[back - 1][0] > opened \
                and not self.has_code(pieces, back - 1, back):
            back -= 1
        # from a line's start (a comment after code on its line stays with it)
        while back < at and self.text[pieces[back][0] - 1] != "\n":
            back += 1
        moved = back < at and any(pieces[index][2] for index in range(back, at)) and \
            self.fits(pieces[back][0], pieces[at][1] if alone else self.line_end(pieces[at]))
        self.cuts.append(opened)
        return pieces[back][0] if moved else None

    def trimmed(self, piece: Piece, after: int | None = None) -> list[Piece] | None:
        """A piece too long only by the white space and trailing comments around its
        content (alone, or ``after`` the chunk open from there), as its content and the
        rest, each a piece; None if its content does not fit either. The content ends at
        its last node's code (``code_end``) and starts at its line's start, or (if that
        is too long, for a definition) at its first code point that is not white space."""
        piece_start, piece_end, nodes = piece
        end = piece_end if not nodes else min(
            piece_end, self.offsets.point(self.code_end(nodes[-1])))
        first = _NOT_SPACE.search(self.text, piece_start, end)
        if first is None:
            return None
        while self.text[end - 1].isspace():
            end -= 1
        starts = [self.text.rfind("\n", piece_start, first.start()) + 1 or piece_start]
        if self.is_definition(piece):   # whole without its indentation, rather than cut
            starts.append(first.start())
        for start in starts:
            if self.fits(start if after is None else after, end):
                return [(piece_start, start, ())] * (start > piece_start) \
                    + [(start, end, nodes)] + [(end, piece_end, ())] * (end < piece_end)
        return None

    def is_definition(self, piece: Piece) -> bool:
        """Whether a piece is a definition (perhaps decorated or exported)."""
        if len(piece[2]) != 1:
            return False
        node = piece[2][0]
        if node.kind_id in self.definitions:
            return True
        for field in self.wrapping:
            inner = node.child_by_field_id(field)
            if inner is not None:
                return inner.kind_id in self.definitions
        return False

    def cut_leaf(self, opened: int | None, start: int, end: int) -> int:
        """Close chunks of a leaf over the size, the chunk open from ``opened`` (if not
        None) carried into its first; returns the start of the last, left open. The
        carried text is not cut: it closes alone if the leaf fits alone (a token is not
        cut) or if it leaves no room for the leaf's first piece."""
        if opened is None:
            starts = self.leaf_starts(start, end, self.size)
        elif self.fits(start, end):   # a token is not cut to join what is open
            starts = [opened, start]
        else:
            starts = [opened]
            room = self.size - self.count(self.text[opened:start]) - self.prefix(opened)[1]
            first = self.leaf_starts(start, end, room) if room > 0 else []
            after = first[1] if len(first) > 1 else end
            if first and self.text[start:after].strip() and self.fits(opened, after):
                start = after
            if start < end:
                starts += self.leaf_starts(start, end, self.size)
        self.cuts += starts[:-1]
        return starts[-1]

    def leaf_starts(self, start: int, end: int, size: int) -> list[int]:
        """The starts of the pieces of ``text[start:end]`` cut at ``size`` (less the
        ``embed_text`` prefix) by its language's separators (chunkd's without a
        language)."""
        leaves = self.splitter.leaves
        leaf = leaves.pop(self.grammar, None)   # back once it has finished the leaf
        size = max(1, size - self.prefix(start)[1])
        if leaf is None:
            from chunkd.kernel.chosen import RecursiveSplitter
            from chunkd.kernel.splitting import SEPARATORS
            from chunkd.strategies.languages import LANGUAGE_SEPARATORS

            separators: list[str | re.Pattern[str]]
            if self.grammar is None:
                separators = list(SEPARATORS)
            else:
                separators = [compile_separator(text)
                              for text in LANGUAGE_SEPARATORS[self.grammar.separators]]
            leaf = RecursiveSplitter(size, 0, separators=separators, keep_separator="start",
                                     strip_whitespace=False, unit=self.splitter.unit)
        elif leaf.chunk_size != size:
            leaf.resize(size, 0)
        made = leaf.feed(self.text[start:end]) + leaf.finish()
        leaves[self.grammar] = leaf
        return [start] + [start + chunk.start for chunk in made[1:]]

    def tiled(self, nodes: list[Node], start: int, end: int, glue: bool = False) -> list[Piece]:
        """``nodes`` as pieces from ``start`` to ``end``: each ends where the next starts,
        at the start of the next's line when only white space comes before it there.
        With ``glue``, leading comments (``LEADING``) join the node on the line after."""
        groups = _glued(nodes, self.leading) if glue else list(zip(nodes))
        points, text, rfind = self.offsets.points, self.text, self.text.rfind
        # Each group's start, or its line's if only white space comes before it there and
        # after the group before (so no line break before previous_end - 1 is looked for).
        cuts = [line if (line := rfind("\n", previous_end and previous_end - 1, first) + 1)
                >= previous_end and (line == first or text[line:first].isspace()) else first
                for previous_end, first in zip(
                    points([group[-1].end_byte for group in groups[:-1]]),
                    points([group[0].start_byte for group in groups[1:]]))]
        bounds = list(accumulate(cuts, max, initial=start))
        bounds.append(end)
        return list(zip(bounds, bounds[1:], groups))

    # --- records -------------------------------------------------------------------------

    def records(self) -> list[Chunk]:
        text, count = self.text, self.count
        starts = self.cuts
        ends = starts[1:] + [len(text)]
        if self.splitter.overlap:
            starts = [starts[0]] + [self.overlapped(before, start, end) for before, start, end
                                    in zip(starts, starts[1:], ends[1:])]
        language = None if self.grammar is None else self.grammar.name
        defined_at, defined = self.outline.starts, self.outline.qualified
        prefixes, symbols_at = self.splitter.prefixes, self.symbols_at
        chunks = []
        for index, (start, end) in enumerate(zip(starts, ends)):
            piece = text[start:end]
            chunks.append(Chunk(
                index, start, end, count(piece), piece,
                embed_text=None if prefixes is None else self.prefix(start)[0] + piece,
                symbols=symbols_at(start), language=language, defines=tuple(
                    defined[bisect_left(defined_at, start):bisect_left(defined_at, end)])))
        return chunks

    def overlapped(self, before: int, start: int, end: int) -> int:
        """A chunk's start moved back over whole lines of the chunk before (from
        ``before``): at most the overlap, and within the size."""
        best = start
        line = start
        while line > before:
            line = self.text.rfind("\n", before, line - 1) + 1
            if line <= before or self.count(self.text[line:start]) > self.splitter.overlap \
                    or not self.fits(line, end):
                break
            best = line
        return best

    @cached_property
    def outline(self) -> Outline:
        """The definitions, found at their keywords where the grammar has them and the
        tree no error (a tree with none has no missing keyword), else by a tree-sitter
        query (in C, but it visits every node: about a quarter of the parse's time)."""
        if self.root is None or self.grammar is None:
            return Outline.made([], [], [], [], [])
        found = self.keyword_definitions() \
            if self.grammar.keywords and not self.root.has_error else None
        if found is None:
            from tree_sitter import QueryCursor

            captured = QueryCursor(definition_query(self.grammar)).captures(self.root)
            found = captured.get("definition", [])
        nodes = sorted(found, key=lambda node: (node.start_byte, -node.end_byte))
        starts = [node.start_byte for node in nodes]
        ends = [node.end_byte for node in nodes]
        parents = []
        enclosing: list[int] = []
        for start in starts:
            while enclosing and ends[enclosing[-1]] <= start:
                enclosing.pop()
            parents.append(enclosing[-1] if enclosing else -1)
            enclosing.append(len(parents) - 1)
        points = self.offsets.points
        return Outline.made(points(starts), points(ends),
                            points([self.code_end(node) for node in nodes]), parents,
                            [self.read_symbol(node) for node in nodes])

    def keyword_definitions(self) -> list[Node] | None:
        """The definitions of a tree without errors: the nodes of a definition's kind
        whose child is a keyword token found in the text (a token is whole words: a
        word that is not one, as in a string or a longer name, is passed over); None
        if the words are so many that the query costs less (a text of keywords in
        strings)."""
        assert self.grammar is not None and self.root is not None   # outline's caller
        root, data = self.root, self.data
        words = [match.span() for match in keyword_pattern(self.grammar).finditer(data)]
        if len(words) * KEYWORD_NODES > root.descendant_count:
            return None
        cursor = root.walk()
        found = []
        for at, end in words:
            cursor.reset(root)
            while cursor.goto_first_child_for_byte(at) is not None:
                pass
            token = cursor.node
            assert token is not None   # a cursor is on a node
            if token.start_byte != at or token.is_named or \
                    token.end_byte != end or not cursor.goto_parent():
                continue
            parent = cursor.node
            if parent is not None and parent.kind_id in self.definitions:
                found.append(parent)
        return found

    def symbols_at(self, start: int) -> tuple[str, ...]:
        """The definitions enclosing the first code point of a chunk that is not white
        space (after their first code point, before the comments that end them),
        outermost first."""
        found = _NOT_SPACE.search(self.text, start)
        if found is None:
            return ()
        point = found.start()
        outline = self.outline
        parents = outline.parents
        at = bisect_left(outline.starts, point) - 1   # the last to start before it
        while at >= 0 and outline.ends[at] <= point:
            at = parents[at]
        if at < 0:
            return ()
        if point < outline.chain_ends[at]:   # before the code end of every one
            return outline.chains[at]
        names = []
        while at >= 0:
            if point < outline.code_ends[at]:
                names.append(outline.symbols[at])
            at = parents[at]
        return tuple(reversed(names))

    def code_end(self, node: Node) -> int:
        """Where the code of ``node`` ends (a byte offset): before the comments that end
        it (Python's parser puts a block's last comments in the block). Found down its
        last children, once a node (the cut asks it of each level of a deep nest)."""
        path = []
        end = None
        while end is None:
            end = self.code_ends.get(node.id)
            if end is not None:
                break
            path.append(node.id)
            if not node.child_count:
                end = node.end_byte
                break
            child: Node | None = node.child(node.child_count - 1)
            while child is not None and child.kind_id in self.leading:
                child = child.prev_sibling
            if child is None:
                end = node.start_byte
                break
            node = child
        for known in path:
            self.code_ends[known] = end
        return end

    def read_symbol(self, node: Node) -> str:
        name = _name_node(node)
        end = node.end_byte if name is None else name.end_byte
        text = self.text[self.offsets.point(node.start_byte):self.offsets.point(end)]
        return _symbol(" ".join(text.split()), name is not None)


def _symbol(words: str, named: bool) -> str:
    """How a definition reads up to its name, from the words of its text up to there
    (``named``; else of all its text: its first line is taken): "class Splitter",
    "def feed", "func (r *Reader) Read", "impl Display for Point" (annotations left
    out)."""
    if words.startswith(("@", "#[")):
        words = _ANNOTATIONS.sub("", words)
    if not named:
        words = words.split("{", 1)[0].strip()
    return words[:SYMBOL_LENGTH]


@lru_cache(maxsize=None)
def definition_query(grammar: Grammar) -> Query:
    """A query that captures ``grammar``'s definitions as "definition"."""
    from tree_sitter import Query

    language = parser(grammar).language
    assert language is not None   # made with it
    kinds = sorted(kind for kind in grammar.definitions
                   if language.id_for_node_kind(kind, True) is not None)
    return Query(language, "[" + " ".join(f"({kind})" for kind in kinds) + "] @definition")


@lru_cache(maxsize=None)
def keyword_pattern(grammar: Grammar) -> re.Pattern[bytes]:
    """The grammar's definition keywords as whole words in UTF-8 text."""
    words = b"|".join(re.escape(word.encode()) for word in grammar.keywords)
    return re.compile(rb"\b(?:" + words + rb")\b")


def _batches(node: Node) -> Iterator[tuple[list[Node], int | None]]:
    """The children of ``node``, ``MOST_CHILDREN`` at a time, each batch with the byte
    where the next starts (None after the last); read with a cursor (a node's n-th child
    is found from its first)."""
    cursor = node.walk()
    cursor.goto_first_child()
    batch: list[Node] = []
    while True:
        child = cursor.node
        assert child is not None   # a cursor on a child is on a node
        if len(batch) == MOST_CHILDREN:
            yield batch, child.start_byte
            batch = []
        batch.append(child)
        if not cursor.goto_next_sibling():
            break
    yield batch, None


def _name_node(node: Node) -> Node | None:
    """A definition's name: its "name" field, the innermost "declarator" (C, C++), its
    "type" (a Rust impl), or the name of its first child that has one (Go's type
    declarations)."""
    name = node.child_by_field_name("name")
    if name is not None:
        return name
    declarator = node.child_by_field_name("declarator")
    if declarator is not None:
        while (inner := declarator.child_by_field_name("declarator")) is not None:
            declarator = inner
        return declarator
    kind = node.child_by_field_name("type")
    if kind is not None:
        return kind
    for child in node.named_children:
        name = child.child_by_field_name("name")
        if name is not None:
            return name
    return None


def _glued(nodes: list[Node], leading: frozenset[int]) -> list[tuple[Node, ...]]:
    """``nodes`` grouped: a run of leading nodes (comments, decorators, attributes),
    each on the line after the one before, joins the node on the line after it; a
    comment on the line where the node before ends stays a group of its own. ``leading``:
    the kind ids of ``LEADING``; rows are looked up only around leading nodes (most
    nodes are none)."""
    groups: list[tuple[Node, ...]] = []
    run: list[Node] = []
    before = None
    for node in nodes:
        if run and node.start_point.row > run[-1].end_point.row + 1:  # a blank line ends it
            groups += zip(run)
            run = []
        if node.kind_id in leading:
            if run or before is None or node.start_point.row > before.end_point.row:
                run.append(node)
            else:
                groups.append((node,))
        elif run:
            groups.append((*run, node))
            run = []
        else:
            groups.append((node,))
        before = node
    groups += zip(run)
    return groups
