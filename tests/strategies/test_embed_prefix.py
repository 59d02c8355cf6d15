"""``--embed-prefix TEXT``: a fixed text (E5's "passage: ") before each chunk's
``embed_text``, counted within the size: the chunks are LangChain's at the size less
the prefix's length, and each ``embed_text`` is the prefix, then what it was."""

from __future__ import annotations

import pytest

import chunkd
from chunkd import Settings, SettingsError
from command import ndjson, run_chunkd
from oracle import corpus_documents, langchain_chunks, token_length

PREFIX = "passage: "


@pytest.mark.parametrize("unit, size, overlap", [("chars", 300, 30), ("tokens", 80, 8)])
def test_chunks_are_langchains_at_the_size_less_the_prefix(unit, size, overlap):
    prefix_length = len(PREFIX) if unit == "chars" else token_length(PREFIX)
    length = len if unit == "chars" else token_length
    for path in corpus_documents()[:4]:
        text = path.read_text(encoding="utf-8")
        result = run_chunkd(f"--{unit}", str(size), "--overlap", str(overlap),
                            "--embed-prefix", PREFIX, str(path))
        assert result.returncode == 0, result.stderr
        records = ndjson(result.stdout)
        assert [r["text"] for r in records] == langchain_chunks(
            text, size - prefix_length, overlap, unit)
        for record in records:
            assert record["embed_text"] == PREFIX + record["text"]
            if length(record["text"]) <= size - prefix_length:  # LangChain's may be longer
                assert prefix_length + length(record["text"]) <= size


def test_it_goes_before_the_heading_path_of_the_markdown_strategy():
    text = "# Guide\n\nIntro text here.\n\n## Setup\n\nInstall it first, then run it.\n"
    records = chunkd.split_text(text, 60, 0, strategy="markdown", embed_text=True,
                                embed_prefix=PREFIX)
    assert records and all(r.embed_text.startswith(PREFIX + " > ".join(r.headings) + "\n\n")
                           and r.embed_text.endswith(r.text) for r in records)
    assert all(len(r.embed_text) <= 60 for r in records)


def test_results_record_it_only_when_set():
    assert "embed_prefix" not in Settings().as_dict()  # earlier results stay current
    assert Settings(embed_prefix=PREFIX).as_dict()["embed_prefix"] == PREFIX
    assert "embed_text" in Settings(embed_prefix=PREFIX).record_fields()


@pytest.mark.parametrize("options, message", [
    (["--strategy", "words", "--embed-prefix", "x"],
     "--embed-prefix counts within a size in chars or tokens: it is for the recursive and "
     "markdown strategies, not words"),
    (["--chars", "10", "--overlap", "1", "--embed-prefix", PREFIX],
     "--embed-prefix takes 9 of the size's 10 chars, which leaves the chunks no more than "
     "the overlap (1); write a larger size or a smaller overlap"),
])
def test_a_prefix_that_cannot_work_is_a_usage_error(options, message):
    result = run_chunkd(*options, input=b"text")
    assert (result.returncode, result.stderr.decode()) == (2, f"chunkd: error: {message}\n")


def test_the_api_says_the_same_by_its_name():
    with pytest.raises(SettingsError, match="^embed_prefix takes 9 of the size's 10 chars"):
        Settings(size=10, overlap=1, embed_prefix=PREFIX)
