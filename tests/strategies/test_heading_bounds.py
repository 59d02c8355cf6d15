"""Heading paths stay bounded, and embed_text fits the size.

Every record repeats its heading path, so a long heading line once multiplied the
output (a 1 MB heading: 1.17 GB of records, 2.3 GB of memory). A heading in a path is
at most 256 code points, cut at a grapheme boundary with "…", and a path is at most
six deep; with --embed-text (markdown) the path counts toward the size, as in
Docling's HybridChunker: the prefix takes at most half of it, and the section's text is
split in the rest, so that every embed_text is within the size."""

from __future__ import annotations

import subprocess
import sys

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
import windows_reference as reference
from command import HANG, chunkd_command, ndjson, run_chunkd
from oracle import corpus_documents, token_length
from markdown_checks import check_embedded, check_markdown, unit_length
from memory import MEASURE, STREAM_BYTES, stream_through_chunkd
from window_checks import SETTINGS, TEXT_FRAGMENTS, check_scanner, cut

#: Peak resident memory a run on these files must stay under (chunkd alone is about 25 MB).
PEAK_LIMIT_MB = 64
#: A record's fixed share of the output beyond copies of its text: its path (six
#: headings of at most 256 code points, in JSON), twice with embed_text, and the keys.
RECORD_SHARE = 1024
#: Output past this ends the run at once: the bounds below are far smaller.
OUTPUT_CAP = 64 * 1024 * 1024


def one_long_heading() -> bytes:
    """A 1 MB document that is one heading line."""
    return ("# " + "word " * (200 * 1024) + "\n").encode()


def a_long_heading_over_small_sections() -> bytes:
    """A 100 KB first-level heading over 2,000 small sections."""
    return ("# " + "word " * (20 * 1024) + "\n"
            + "".join(f"## s{n}\nabcdefgh\n" for n in range(2000))).encode()


def measured_run(args: list[str]) -> tuple[bytes, int]:
    """The installed chunkd's output and peak RSS in MB; a run that writes more than
    OUTPUT_CAP is killed and fails."""
    process = subprocess.Popen([sys.executable, "-c", MEASURE, chunkd_command(), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output = bytearray()
    while block := process.stdout.read(1 << 20):
        output += block
        if len(output) > OUTPUT_CAP:
            process.kill()
            process.stdout.close()       # chunkd, left alone, ends at the closed pipe
            process.wait(timeout=HANG)
            pytest.fail(f"more than {OUTPUT_CAP} bytes of output for chunkd {' '.join(args)}")
    status = process.wait(timeout=HANG)
    assert status == 0, process.stderr.read()[-2000:]
    return bytes(output), int(process.stderr.read().split()[-1])


def check_bounded(records: list[dict], output: bytes, document: bytes, peak_mb: int) -> None:
    """Output within three copies of the input and a fixed share per record; every
    heading within the bound; memory bounded."""
    assert len(output) <= 3 * len(document) + RECORD_SHARE * len(records), \
        (len(output), len(document), len(records))
    assert all(len(heading) <= reference.HEADING_LIMIT and len(r["headings"]) <= 6
               for r in records for heading in r["headings"])
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"


@pytest.mark.parametrize("embed", [[], ["--embed-text"]], ids=["records", "embed-text"])
def test_one_megabyte_heading_keeps_output_and_memory_bounded(tmp_path, embed):
    document = one_long_heading()
    path = tmp_path / "longhead.md"
    path.write_bytes(document)
    output, peak_mb = measured_run(["--strategy", "markdown", *embed, str(path)])
    records = ndjson(output)
    # The chunks of one 1000-code-point size: about one a 900 code points of text
    # (overlap 100), fewer than three a 1000.
    assert len(records) <= 3 * len(document) // 1000
    check_bounded(records, output, document, peak_mb)
    text = document.decode()
    [heading] = {tuple(r["headings"]) for r in records}
    assert heading == (reference.capped(text[2:].strip()),)
    assert all(text[r["start"]:r["end"]] == r["text"] for r in records)
    if embed:
        assert all(len(r["embed_text"]) <= 1000 for r in records)
        assert all(r["embed_text"] == heading[0] + "\n\n" + r["text"] for r in records)


@pytest.mark.parametrize("embed", [[], ["--embed-text"]], ids=["records", "embed-text"])
def test_a_long_heading_over_many_sections_keeps_output_and_memory_bounded(tmp_path, embed):
    document = a_long_heading_over_small_sections()
    path = tmp_path / "sections.md"
    path.write_bytes(document)
    output, peak_mb = measured_run(["--strategy", "sections", *embed, str(path)])
    records = ndjson(output)
    assert len(records) == 2001                    # one a section
    check_bounded(records, output, document, peak_mb)
    if embed:   # sections count in sections: embed_text keeps its form, capped headings
        assert all(r["embed_text"] == " > ".join(r["headings"]) + "\n\n" + r["text"]
                   for r in records)


@pytest.mark.parametrize("heading,kept", [
    ("a" * 256, "a" * 256),                           # at the bound: whole
    ("a" * 257, "a" * 255 + "…"),
    ("a" * 254 + "e\u0301" + "z" * 9, "a" * 254 + "…"),   # never inside a cluster
    ("a" * 255 + "e\u0301" + "z" * 9, "a" * 255 + "…"),
    ("👩\u200d👩\u200d👧" * 60, "👩\u200d👩\u200d👧" * 51 + "…"),
    ("e" + "\u0301" * 300, "…"),                      # one cluster longer than the bound
])
def test_a_long_heading_is_cut_at_a_grapheme_boundary(heading, kept):
    document = f"# {heading} #\nbody\n## Inner\ntext\n".encode()
    for strategy in ("markdown", "sections"):
        result = run_chunkd("--strategy", strategy, input=document)
        assert result.returncode == 0, result.stderr
        assert [r["headings"] for r in ndjson(result.stdout)] == [[kept], [kept, "Inner"]]
    assert reference.capped(heading) == kept


# Long heading lines among the window tests' fragments: cut at any place in a cluster,
# and long runs of white space or of # where the title begins and ends.
LONG_HEADINGS = ["# " + "x" * 250 + fragment * 3 + "\n" for fragment in
                 ["e\u0301", "🇫🇷", "👩\u200d👩\u200d👧", "\u0915\u094d\u0937", "中文", "ab "]] + [
    "# " + " " * 300 + "title ##\n", "# title" + " " * 300 + "### \n", "## " + "#" * 300,
    "# " + "a" * 300 + "\u3000###\n", "#\t" + "\u3000" * 300 + "x", "# " + "x " * 200]
headed_documents = st.lists(st.one_of(st.sampled_from(TEXT_FRAGMENTS + LONG_HEADINGS),
                                      st.text(max_size=5)), max_size=60).map("".join)


@SETTINGS
@given(cut(headed_documents))
def test_long_headings_equal_the_reference(doc):
    """Sections and their capped paths, whole and in pieces, as the plain reference
    has them."""
    text, pieces = doc
    check_scanner(text, pieces)
    splitter = chunkd.Splitter(1, 0, strategy="sections")
    chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
    assert [(c.start, c.end, c.headings) for c in chunks] == [
        (w["start"], w["end"], w["headings"]) for w in reference.windows(text, "sections", 1, 0)]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut(headed_documents), st.integers(1, 120), st.data(), st.sampled_from(["chars", "tokens"]),
       st.booleans())
def test_markdown_with_long_headings_equals_the_reference(doc, size, data, unit, strip_headings):
    """A long heading's section is reported before its line ends (its cut title cannot
    change): the chunks are still LangChain's, whole and in pieces, with and without
    embed_text, the heading line stripped or not."""
    text, pieces = doc
    check_markdown(text, pieces, unit, size, data.draw(st.integers(0, size - 1)), strip_headings)


@pytest.mark.parametrize("text", [
    "intro\n# " + "x " * 200 + "\nbody text here\n## " + "y" * 300 + " ##\nmore\n",
    "# " + "x" * 300,                                   # the document ends in the line
    "# " + "x" * 300 + "\n",
    "# " + "x" * 255 + " " * 50 + "###\nafter\n",     # whole: the closing run goes
])
def test_long_heading_lines_fed_a_code_point_at_a_time(text):
    for strip_headings in (False, True):
        check_markdown(text, list(text), "chars", 40, 5, strip_headings)
        check_markdown(text, [text], "tokens", 16, 2, strip_headings)


@pytest.mark.slow
def test_a_gigantic_heading_line_streams_in_bounded_memory():
    """One heading line of 210 MB: its chunks stream as it is read, as a long section's do."""
    block = b"# " + b"word " * 200_000
    for embed in ([], ["--embed-text"]):
        status, lines, peak_mb = stream_through_chunkd(["--strategy", "markdown", *embed], block)
        assert status == 0 and lines > STREAM_BYTES // 1100
        assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut(headed_documents), st.integers(1, 120), st.data(), st.sampled_from(["chars", "tokens"]),
       st.booleans())
def test_embed_text_fits_the_size(doc, size, data, unit, strip_headings):
    """Each section's chunks are LangChain's at the size less its prefix, and every
    embed_text fits the size (but where LangChain's chunk alone does not)."""
    text, pieces = doc
    overlap = data.draw(st.integers(0, size - 1))
    splitter = chunkd.Splitter(size, overlap, unit=unit, strategy="markdown",
                               strip_headings=strip_headings, embed_text=True)
    chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
    check_embedded(text, chunks, unit, size, overlap, strip_headings)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headed_documents, st.integers(1, 60), st.data(), st.sampled_from(["chars", "tokens"]),
       st.sampled_from(["end", "start", "none"]))
def test_embed_text_fits_without_stripping(text, size, data, unit, keep):
    """Chunks that keep their white space: a text beginning with white space can merge
    with the blank line into other tokens, and is counted whole."""
    overlap = data.draw(st.integers(0, size - 1))
    chunks = chunkd.split_text(text, size, overlap, unit=unit, strategy="markdown",
                               embed_text=True, strip_whitespace=False, keep_separator=keep)
    length = unit_length(unit)
    for chunk in chunks:
        prefix = chunk.embed_text.removesuffix(chunk.text)
        assert chunk.embed_text == prefix + chunk.text
        assert 2 * length(prefix) <= size
        assert length(chunk.embed_text) <= max(size, length(chunk.text))
        assert prefix == "" or prefix.endswith("\n\n")


def test_a_blank_line_that_merges_with_white_space_is_counted():
    """'!!' and the blank line are 2 tokens and the chunk 10 of the 12, but together
    they are 13: this chunk goes without its prefix."""
    document = b"# !!\n\n \n\xe4\xb8\xad\xe6\x96\x87\xc3\xa9. \r\n\n.x\xe4\xb8\xad\xe6\x96\x87."
    result = run_chunkd("--strategy", "markdown", "--tokens", "12", "--overlap", "0",
                        "--no-strip", "--strip-headings", "--embed-text", input=document)
    assert result.returncode == 0, result.stderr
    [record] = ndjson(result.stdout)
    assert token_length("!!\n\n" + record["text"]) == 13
    assert record["embed_text"] == record["text"] and token_length(record["text"]) <= 12


def test_the_prefix_takes_at_most_half_the_size():
    """Outermost headings go first; then the innermost is cut; then nothing."""
    text = "# Guide\n## Installing on Linux\nSteps to follow, one by one.\n"

    def prefixes(size: int) -> list[str]:
        chunks = chunkd.split_text(text, size, 0, strategy="markdown", embed_text=True)
        return sorted({c.embed_text.removesuffix(c.text) for c in chunks if c.headings[1:]})

    assert prefixes(100) == ["Guide > Installing on Linux\n\n"]       # 29 <= 50
    assert prefixes(50) == ["Installing on Linux\n\n"]                # 21 <= 25
    assert prefixes(30) == ["Installing o…\n\n"]                      # cut to 15
    assert prefixes(7) == [""]                                        # only "…" would fit


@pytest.mark.slow
@pytest.mark.parametrize("unit,size", [("chars", 60), ("tokens", 24)])
def test_embed_text_fits_on_the_corpus(unit, size):
    """Every shared-corpus document at a size small enough that paths must shrink."""
    length = unit_length(unit)
    shrunk = 0
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        chunks = chunkd.split_text(text, size, size // 10, unit=unit, strategy="markdown",
                                   embed_text=True)
        check_embedded(text, chunks, unit, size, size // 10, False)
        shrunk += sum(1 for c in chunks if c.headings and length(
            " > ".join(c.headings) + "\n\n") * 2 > size)
    assert shrunk > 1000          # the rule was exercised, not only the easy case


@pytest.mark.slow
def test_the_command_fits_tokens_on_the_corpus():
    paths = [str(p) for p in corpus_documents()[::25]]
    result = run_chunkd("--strategy", "markdown", "--tokens", "32", "--embed-text", *paths)
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    assert records and all(token_length(r["embed_text"]) <= 32 or r["embed_text"] == r["text"]
                           for r in records)
    assert any(r["embed_text"] != r["text"] for r in records)


def test_cut_heading_keeps_whole_clusters():
    from chunkd.kernel._windows import cut_heading

    assert cut_heading("ab" + "e\u0301" + "cd", 3) == "ab…"
    assert cut_heading("ab" + "e\u0301" + "cd", 4) == "abe\u0301…"
    assert [m.end() for m in regex.finditer(r"\X", "abe\u0301")] == [1, 2, 4]


def test_a_splitter_resizes_only_between_documents():
    """The markdown strategy resizes one recursive splitter from section to section."""
    from chunkd.kernel._kernel import RecursiveSplitter

    splitter = RecursiveSplitter(10, 2)
    splitter.resize(5, 1)
    assert [c.text for c in splitter.feed("aaa bbb ccc") + splitter.finish()] == ["aaa", "bbb", "ccc"]
    splitter.feed("more")
    with pytest.raises(ValueError, match="between documents only"):
        splitter.resize(8, 1)
    splitter.finish()
    for size, overlap in [(0, 0), (3, 4), (3, -1)]:
        with pytest.raises(ValueError):
            splitter.resize(size, overlap)
    assert (splitter.chunk_size, splitter.chunk_overlap) == (5, 1)
