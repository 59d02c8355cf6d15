"""``chunkd watch``'s log says what happened to each file, and counts in good English."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_a_skipped_link_is_neither_logged_as_chunked_nor_counted(inbox, tmp_path, watch):
    target = tmp_path / "target.md"
    target.write_text("outside the inbox", encoding="utf-8")
    (inbox / "link.md").symlink_to(target)
    (inbox / "a.md").write_text("A file to chunk.", encoding="utf-8")
    watcher = watch(inbox, "-v")
    watcher.wait_for(lambda: watcher.processed() == ["a.md"], what="a.md processed")
    log = watcher.log()
    assert any(line.startswith("skipped link.md: symbolic link") for line in log)
    assert not any(line.startswith("chunking link.md") for line in log)
    assert "rescanned (start): 1 file queued" in " ".join(log)
    assert any(line.endswith("; 1 file to catch up") for line in log)
    assert watcher.stop() == 0
