"""``chunkd watch --vectors``: results carry each chunk's vector from the model (a
loopback OpenAI-compatible endpoint), the embedding cache is on by default in the
output folder, so that an edit sends only its new chunks' texts, and the inbox never
takes the cache's files as inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedding import CountingEndpoint, hashed_vectors
from watching import Watcher, results

pytestmark = pytest.mark.slow

PARAGRAPHS = [f"Paragraph {n} tells its own story about topic {n}." for n in range(6)]


def test_results_carry_vectors_and_an_edit_embeds_only_new_chunks(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    with CountingEndpoint() as server:
        watcher = Watcher(inbox, "--chars", "60", "--overlap", "0", "--vectors",
                          "--embed-url", server.url, "--embed-model", "hashed",
                          "--recursive", "--include", "*", "--rescan", "0.5", "-v")
        try:
            watcher.started()
            (inbox / "a.md").write_text("\n\n".join(PARAGRAPHS), encoding="utf-8")
            watcher.wait_for(lambda: "a.md" in watcher.processed(), what="a.md's result")
            chunks = results(inbox)["a.md"]["chunks"]
            assert len(chunks) == len(PARAGRAPHS)
            for chunk in chunks:
                assert chunk["vector"] == pytest.approx(hashed_vectors([chunk["text"]])[0])
            assert sorted(server.texts) == sorted(chunk["text"] for chunk in chunks)

            sent = len(server.texts)
            edited = PARAGRAPHS[:3] + ["A new paragraph, never seen before."] + PARAGRAPHS[4:]
            (inbox / "a.md").write_text("\n\n".join(edited), encoding="utf-8")
            watcher.wait_for(lambda: watcher.processed().count("a.md") == 2,
                             what="the edit's result")
            assert server.texts[sent:] == ["A new paragraph, never seen before."]
            new_chunks = results(inbox)["a.md"]["chunks"]
            assert [c["text"] for c in new_chunks] == edited
            assert all(c["vector"] == pytest.approx(hashed_vectors([c["text"]])[0])
                       for c in new_chunks)

            # The cache is in the inbox (its output folder), and --include * with
            # --recursive would take anything else there: rescans pass, it stays untaken.
            cache = inbox / ".embedding-cache"
            assert cache.is_dir() and any(cache.iterdir())
            watcher.rescans_pass()
            assert set(watcher.processed()) == {"a.md"}
            assert not [p for p in cache.rglob("*") if p.name.endswith((".chunks.json",
                                                                         ".error.json"))]
        finally:
            assert watcher.stop() == 0


def test_a_cache_folder_given_inside_the_inbox_is_never_taken(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    with CountingEndpoint() as server:
        watcher = Watcher(inbox, "--chars", "60", "--vectors", "--embed-url", server.url,
                          "--embed-model", "hashed", "--embed-cache", str(inbox / "cache"),
                          "--recursive", "--include", "*", "--rescan", "0.5", "-v")
        try:
            watcher.started()
            (inbox / "b.md").write_text("\n\n".join(PARAGRAPHS), encoding="utf-8")
            watcher.wait_for(lambda: "b.md" in watcher.processed(), what="b.md's result")
            assert any((inbox / "cache").iterdir())
            watcher.rescans_pass()
            assert set(watcher.processed()) == {"b.md"}
        finally:
            assert watcher.stop() == 0


#: What is planted as the default cache folder (``.embedding-cache`` in the inbox, which
#: producers write to), and the line that refuses it.
PLANTED = {
    "a link to another folder": (lambda cache, target: cache.symlink_to(target, True),
                                 "a symbolic link, not followed: give the folder it names, "
                                 "or remove it"),
    "a file": (lambda cache, target: cache.write_text("planted", encoding="utf-8"),
               "not a folder"),
}


@pytest.mark.parametrize("planted", PLANTED)
def test_a_cache_folder_planted_in_the_inbox_is_not_used(tmp_path: Path,
                                                         planted: str) -> None:
    """A link in the cache folder's place would have the daemon write its database
    wherever the link points, outside its folders; it is not followed: the daemon says so
    in one line at start and runs without the cache (a producer can put it there, and
    must not stop the service), and nothing is written there (a file there alike, not a
    traceback)."""
    inbox, elsewhere = tmp_path / "inbox", tmp_path / "elsewhere"
    inbox.mkdir()
    elsewhere.mkdir()
    (inbox / "k.md").write_text("y1 y2", encoding="utf-8")
    make, says = PLANTED[planted]
    make(inbox / ".embedding-cache", elsewhere)
    with CountingEndpoint() as server:
        watcher = Watcher(inbox, "--chars", "60", "--vectors", "--embed-url", server.url,
                          "--embed-model", "hashed")
        try:
            watcher.wait_for(lambda: "k.md" in watcher.processed(), what="k.md's result")
            assert watcher.stop() == 0
        finally:
            watcher.kill()
        assert server.texts == ["y1 y2"]
    assert watcher.lines("chunkd watch: --embed-cache") == [
        f"chunkd watch: --embed-cache {inbox / '.embedding-cache'}: {says}; running without "
        "the embedding cache: every text goes to the model"]
    assert list(elsewhere.iterdir()) == []
