"""``--metrics``: a flood of idle connections cannot take the daemon's threads, a
connection that says nothing is closed after the idle timeout, the page still answers;
a source the store refuses counts as a failed file. Through the installed ``chunkd
watch``, against a real PostgreSQL; the systemd units bound the service's tasks."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from command import HANG
from store_servers import CHUNKING, expected_chunks, paragraphs

pytestmark = pytest.mark.slow

#: The idle timeout the daemon is given here (a sitecustomize sets it), for short tests.
IDLE = 1.0
MAX_CONNECTIONS = 64
UNITS = Path(__file__).resolve().parent.parent.parent / "systemd"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def short_idle_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python sets the metrics' idle timeout to ``IDLE`` at start."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        f"import chunkd.service.metrics\nchunkd.service.metrics.IDLE_TIMEOUT = {IDLE}\n", encoding="utf-8")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(hook), os.environ.get("PYTHONPATH")])))


def threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)$", status, re.M).group(1))


def page(port: int) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=HANG) as answer:
        return answer.status, answer.read().decode()


def samples(text: str) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(sample.name, ",".join(sample.labels.values())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def answer_by(connection: socket.socket, deadline: float) -> bytes | None:
    """What the server sends on the connection before it ends it (end of file or
    reset) by ``deadline`` (``time.monotonic``), the client saying nothing; None if it
    does not end it by then."""
    received = b""
    try:
        while True:
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            data = connection.recv(4096)
            if not data:
                return received
            received += data
    except TimeoutError:
        return None
    except ConnectionResetError:
        return received


def test_idle_connections_are_bounded_closed_and_the_page_still_answers(watch, inbox,
                                                                         tmp_path):
    port = free_port()
    watcher = watch(inbox, "--metrics", f"127.0.0.1:{port}", "-v", env=short_idle_env(tmp_path))
    watcher.started()
    assert page(port)[0] == 200
    before = threads(watcher.process.pid)
    most, done = [before], threading.Event()

    def sample() -> None:  # the process's threads, every 20 ms, until the flood is over
        while not done.wait(0.02):
            most.append(threads(watcher.process.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    flood: list[socket.socket] = []
    try:
        flood += [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        # Those it took are closed after the idle timeout, saying nothing; the others
        # are turned away at once with a 503, without a thread (and once the idle ones
        # are gone, the kernel's queue hands it the next ones).
        deadline = time.monotonic() + IDLE + 5
        answers = [answer_by(connection, deadline) for connection in flood]
    finally:
        done.set()
        sampler.join()
        for connection in flood:
            connection.close()
    assert max(most) <= before + MAX_CONNECTIONS, (before, max(most))
    assert max(most) >= before + MAX_CONNECTIONS // 2, "the flood never reached the server"
    assert None not in answers
    assert any(answer.startswith(b"HTTP/1.0 503 ") for answer in answers)
    assert b"" in answers
    watcher.wait_for(lambda: threads(watcher.process.pid) <= before, timeout=IDLE + 5,
                     what="the connections' threads to end")
    status, text = page(port)
    assert status == 200 and "chunkd_files_chunked_total" in text
    assert watcher.stop() == 0


def test_a_request_trickled_a_byte_at_a_time_is_cut_off(watch, inbox, tmp_path):
    """Every byte restarts a socket's timeout: the request's line and headers have a
    deadline of their own."""
    port = free_port()
    watcher = watch(inbox, "--metrics", f"127.0.0.1:{port}", env=short_idle_env(tmp_path))
    watcher.started()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\n")
        cut = False
        while time.monotonic() - started < IDLE + 5:
            time.sleep(0.2)
            try:
                connection.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            connection.settimeout(0.01)
            try:
                if connection.recv(4096) == b"":
                    cut = True
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                cut = True
                break
    assert cut, "a client trickling its headers kept its connection"
    assert page(port)[0] == 200
    assert watcher.stop() == 0


def test_a_source_the_store_refuses_counts_as_a_failed_file(watch, inbox, postgres, endpoint):
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_postgres import PGVector

    (inbox / "ma.md").write_text(paragraphs(900, 3))
    (inbox / "mb.md").write_text(paragraphs(901, 3))
    taken = next(chunk_id for chunk_id, (source, _) in
                 expected_chunks(inbox, *CHUNKING[:2]).items() if source == "mb.md")
    other = PGVector(FakeEmbeddings(size=8), collection_name="holder_metrics",
                     connection=postgres.url.replace("postgresql://", "postgresql+psycopg://"))
    other.add_texts(["holds an id chunkd wants"], ids=[taken])
    port = free_port()
    watcher = watch(inbox, "--sink", postgres.url, "--collection", "refused_metrics",
                    *CHUNKING, "--embed-url", endpoint.url, "--embed-model", "hashed",
                    "--rescan", "0.5", "--workers", "1", "-v", "--metrics", f"127.0.0.1:{port}")
    watcher.started()
    watcher.wait_for(lambda: watcher.lines("stored ma.md") and any(
        "held by another collection" in line for line in watcher.log()),
        what="ma.md stored and mb.md refused")
    found = samples(page(port)[1])
    assert found[("chunkd_files_chunked_total", "")] == 2
    assert found[("chunkd_sink_failures_total", "refused")] >= 1
    assert found[("chunkd_files_failed_total", "")] == 1
    assert found[("chunkd_sink_pending", "")] == 0
    other.delete([taken])
    assert watcher.stop() == 0


@pytest.mark.parametrize("unit", ["chunkd.service", "chunkd@.service"])
def test_the_units_bound_the_service_tasks(unit):
    """Threads and processes together (systemd counts both): a bound the daemon's
    workers, their libraries' threads and ``MAX_CONNECTIONS`` metrics connections fit."""
    text = (UNITS / unit).read_text(encoding="utf-8")
    values = re.findall(r"^TasksMax=(\d+)$", text, re.M)
    assert len(values) == 1 and MAX_CONNECTIONS < int(values[0]) <= 4096, values
