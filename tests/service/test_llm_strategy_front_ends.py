"""``--strategy llm`` in the daemon and in sync (LanceDB): the chunks the filter makes,
from the same scripted model (``chat_server``), one test each."""

from __future__ import annotations

import subprocess

import pytest
from chat_server import serving
from command import HANG, chunkd_command, ndjson
from store_servers import assert_store_holds, lance_rows, sync
from test_llm_strategy import DOC, topics
from watching import filter_chunks, results

LLM = ("--strategy", "llm", "--chars", "200", "--min-chars", "20")


@pytest.fixture
def model():
    with serving(topics) as made:
        yield made


def endpoint_of(model) -> tuple[str, ...]:
    return ("--llm-url", model.url, "--llm-model", "toy-llm")


@pytest.mark.slow
def test_watch_chunks_with_the_llm(inbox, watch, model):
    watcher = watch(inbox, *LLM, *endpoint_of(model))
    watcher.started()
    (inbox / "garden.md").write_text(DOC)
    watcher.wait_for(lambda: "garden.md" in results(inbox), what="its result")
    asked = len(model.requests)
    chunks = results(inbox)["garden.md"]["chunks"]
    assert asked and len(chunks) > 3
    assert chunks == filter_chunks(inbox / "garden.md", *LLM, *endpoint_of(model))
    assert all(DOC[chunk["start"]:chunk["end"]] == chunk["text"] for chunk in chunks)
    assert watcher.stop() == 0


@pytest.mark.slow
def test_sync_chunks_with_the_llm(tmp_path, endpoint, model):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "garden.md").write_text(DOC)
    url = str(tmp_path / "lance")
    # (sync's own chunking options come first; the strategy's after them win)
    done = sync(folder, url, endpoint, *LLM, *endpoint_of(model))
    assert done.returncode == 0, done.stderr
    chunked = subprocess.run([chunkd_command(), "--ids", *LLM, *endpoint_of(model),
                              "garden.md"], cwd=folder, capture_output=True, timeout=HANG)
    assert chunked.returncode == 0, chunked.stderr
    expected = {record["chunk_id"]: (record["doc"], record["text"])
                for record in ndjson(chunked.stdout)}
    assert len(expected) > 3
    assert_store_holds(lance_rows(url, "chunkd"), expected)
    # What the boundaries cost, after the summary, as the filter says it.
    cost = chunked.stderr.decode().splitlines()[-1].removeprefix("chunkd: ")
    said = done.stderr.decode().splitlines()[-1]
    assert said.startswith(f"chunkd sync: {cost.split(' tokens')[0]} tokens"), said
