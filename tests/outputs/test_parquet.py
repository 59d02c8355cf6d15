"""The filter with Parquet: --input parquet and --format parquet against the filter's own
NDJSON records, errors and exit codes, and 1 GB chunked in bounded memory."""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from command import HANG, chunkd_command, install_command, ndjson, run_chunkd
from oracle import langchain_chunks
from tables import corpus_rows, filter_records, write_corpus_parquet

SETTINGS = [[], ["--tokens", "200", "--overlap", "20", "--count-tokens"]]


@pytest.fixture(scope="module")
def corpus_parquet(tmp_path_factory):
    return write_corpus_parquet(tmp_path_factory.mktemp("corpus") / "corpus.parquet")


def read_rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def leftovers(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".part"))


@pytest.mark.parametrize("settings", SETTINGS, ids=["chars", "tokens"])
def test_parquet_in_and_out_equal_the_ndjson_records(corpus_parquet, tmp_path, settings):
    records = filter_records(*settings)
    out = tmp_path / "chunks.parquet"
    result = run_chunkd("--input", "parquet", str(corpus_parquet), *settings,
                        "--format", "parquet", "--output", str(out))
    assert (result.returncode, result.stderr) == (0, b"")
    assert read_rows(out) == records
    assert pq.read_schema(out).field("number").type == pa.int32()  # carried as it came
    assert pq.ParquetFile(out).metadata.num_row_groups >= 1
    assert leftovers(tmp_path) == []
    for jobs in ("1", "2"):
        as_ndjson = run_chunkd("--input", "parquet", str(corpus_parquet), *settings,
                               "--jobs", jobs)
        assert ndjson(as_ndjson.stdout) == records


def test_text_files_to_parquet_equal_the_ndjson_records(tmp_path):
    paths = []
    for row in corpus_rows()[::40]:
        path = tmp_path / f"{row['number']}.md"
        path.write_text(row["text"], encoding="utf-8")
        paths.append(str(path))
    out = tmp_path / "out.parquet"
    result = run_chunkd("--chars", "400", *paths, "--format", "parquet", "--output", str(out))
    assert result.returncode == 0, result.stderr
    rows = read_rows(out)
    # A FILE may be a PDF (--input auto): the rows have pages, null for text.
    assert all(row.pop("pages") is None for row in rows)
    assert rows == ndjson(run_chunkd("--chars", "400", *paths).stdout)
    assert pq.read_schema(out).field("doc").type == pa.string()
    text = run_chunkd("--input", "text", "--chars", "400", *paths, "--format", "parquet",
                      "--output", str(out))
    assert text.returncode == 0 and "pages" not in pq.read_schema(out).names


def test_stdin_to_parquet_has_no_doc_column_and_empty_input_an_empty_file(tmp_path):
    text = corpus_rows()[3]["text"]
    out = tmp_path / "stdin.parquet"
    written = run_chunkd("--format", "parquet", "--output", str(out), input=text.encode())
    assert written.returncode == 0
    rows = read_rows(out)
    assert [row["text"] for row in rows] == langchain_chunks(text, 1000, 100, "chars")
    assert "doc" not in rows[0]
    assert run_chunkd("--format", "parquet", "--output", str(out), input=b"").returncode == 0
    assert pq.read_table(out).num_rows == 0
    assert pq.read_schema(out).names == ["index", "start", "end", "length", "text"]


def test_rows_without_an_id_are_named_by_their_number(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"body": ["first document", "", "third one"]}), path)
    records = ndjson(run_chunkd("--input", "parquet", "--text-column", "body", str(path)).stdout)
    assert [(r["doc"], r["text"]) for r in records] == [(0, "first document"), (2, "third one")]


def test_id_column_names_the_documents(tmp_path):
    path = tmp_path / "named.parquet"
    pq.write_table(pa.table({"url": ["https://a", "https://b"], "text": ["alpha", "beta"]}), path)
    records = ndjson(run_chunkd("--input", "parquet", "--id-column", "url", str(path)).stdout)
    assert [(r["doc"], r["text"]) for r in records] == [("https://a", "alpha"),
                                                        ("https://b", "beta")]
    assert set(records[0]) == {"doc", "index", "start", "end", "length", "text"}


def test_bad_rows_and_files_are_named_and_the_rest_is_chunked(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"id": ["g"], "text": ["good text"]}), good)
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c", "d"],
                             "text": pa.array([b"fine", None, b"bad \xff byte", b"after"])}), rows)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": ["o"], "text": ["x"], "extra": [1]}), other)
    not_parquet = tmp_path / "notes.txt"
    not_parquet.write_text("not a Parquet file")
    inputs = [str(tmp_path / "missing.parquet"), str(not_parquet), str(tmp_path), str(good),
              str(rows), str(other)]
    out = tmp_path / "out.parquet"
    result = run_chunkd("--input", "parquet", *inputs, "--format", "parquet", "--output", str(out))
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"chunkd: {tmp_path}/missing.parquet: No such file or directory",
        f"chunkd: {not_parquet}: Parquet magic bytes not found in footer. Either the file is "
        "corrupted or this is not a parquet file.",
        f"chunkd: {tmp_path}: Is a directory",
        f"chunkd: {rows}: row 1 (id b): the text is null",
        f"chunkd: {rows}: row 2 (id c): invalid UTF-8 at byte 4 (use --errors replace "
        "to substitute U+FFFD)",
        f"chunkd: {other}: its columns differ from the first file's, which the output follows "
        "(doc string, not doc string, extra int64)",
    ]
    assert [(r["doc"], r["text"]) for r in read_rows(out)] == [
        ("g", "good text"), ("a", "fine"), ("d", "after")]
    replaced = run_chunkd("--input", "parquet", str(rows), "--errors", "replace")
    assert [r["text"] for r in ndjson(replaced.stdout)] == ["fine", "bad \ufffd byte", "after"]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_strings_that_are_not_utf8_are_the_rows_errors(tmp_path, jobs):
    """Parquet readers do not check that a string column holds UTF-8: a bad text is
    decoded as --errors says, a bad id or carried value is its row's error."""
    def strings(values):
        return pa.array(values).view(pa.string())
    path = tmp_path / "strings.parquet"
    pq.write_table(pa.table({
        "id": strings([b"a", b"b", b"c\xff", b"d"]),
        "text": strings([b"good text", b"bad \xff text", b"fine", b"more"]),
        "url": strings([b"u", b"v", b"w", b"x\xfe"]),
    }), path)
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"id": ["g"], "text": ["after"], "url": ["z"]}), good)
    result = run_chunkd("--jobs", jobs, "--input", "parquet", str(path), str(good))
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"chunkd: {path}: row 1 (id b): invalid UTF-8 at byte 4 (use --errors replace "
        "to substitute U+FFFD)",
        f"chunkd: {path}: row 2: the id column holds a string that is not valid UTF-8",
        f"chunkd: {path}: row 3 (id d): url holds a string that is not valid UTF-8",
    ]
    assert [(r["doc"], r["text"]) for r in ndjson(result.stdout)] == [
        ("a", "good text"), ("g", "after")]
    replaced = run_chunkd("--input", "parquet", str(path), "--errors", "replace")
    assert [r["text"] for r in ndjson(replaced.stdout)] == ["good text", "bad \ufffd text"]


def test_strings_that_are_not_utf8_are_the_rows_errors_in_parquet_output(tmp_path):
    """A carried string that is not UTF-8 (the id, a column, a struct's field, a list's
    item) is its row's error in Parquet output as in NDJSON: the output holds the other
    rows and is a valid Parquet file."""
    def strings(values):
        return pa.array(values).view(pa.string())
    path = tmp_path / "strings.parquet"
    pq.write_table(pa.table({
        "id": strings([b"a", b"b\xff", b"c", b"d", b"e", b"f"]),
        "text": ["one", "two", "three", "four", "five", "six"],
        "url": strings([b"u", b"v", b"u\xff", b"w", b"x", b"y"]),
        "meta": pa.StructArray.from_arrays([strings([b"m", b"m", b"m", b"m\xff", b"m", b"m"])],
                                           names=["source"]),
        "tags": pa.ListArray.from_arrays([0, 1, 2, 3, 4, 6, 7],
                                         strings([b"t", b"t", b"t", b"t", b"t", b"t\xfe", b"t"])),
    }), path)
    errors = [f"chunkd: {path}: row 1: the id column holds a string that is not valid UTF-8",
              f"chunkd: {path}: row 2 (id c): url holds a string that is not valid UTF-8",
              f"chunkd: {path}: row 3 (id d): meta holds a string that is not valid UTF-8",
              f"chunkd: {path}: row 4 (id e): tags holds a string that is not valid UTF-8"]
    records = run_chunkd("--input", "parquet", str(path))
    assert (records.returncode, records.stderr.decode().splitlines()) == (1, errors)
    out = tmp_path / "out.parquet"
    result = run_chunkd("--input", "parquet", str(path), "--format", "parquet",
                        "--output", str(out))
    assert (result.returncode, result.stderr.decode().splitlines()) == (1, errors)
    written = pq.read_table(out)
    written.validate(full=True)
    assert written.select(["doc", "text", "url", "meta", "tags"]).to_pylist() == [
        {"doc": record["doc"], "text": record["text"], "url": record["url"],
         "meta": record["meta"], "tags": record["tags"]} for record in ndjson(records.stdout)]
    assert written.column("doc").to_pylist() == ["a", "f"]


@pytest.mark.slow
def test_repeated_documents_in_a_small_file_stay_in_bounded_memory(tmp_path):
    """A dictionary-encoded column of one document repeated: the file is small, what
    it decodes to is not; a batch of rows is read at a time, not the file."""
    document = " ".join(f"word{n}" for n in range(60_000))  # about 470 KB
    path = tmp_path / "repeated.parquet"
    pq.write_table(pa.table({"id": range(1000), "text": [document] * 1000}), path,
                   write_batch_size=1)
    assert path.stat().st_size < 2_000_000
    result = subprocess.run([sys.executable, "-c", MEASURE, chunkd_command(), "--input",
                             "parquet", str(path), "--jobs", "1", "-q"],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    peak_mb = int(result.stderr.split()[-1])
    assert peak_mb < 200, f"peak RSS {peak_mb} MB for a {path.stat().st_size} B file"


def test_carried_columns_reach_parquet_output_exactly(tmp_path):
    """Values Python cannot hold (nanoseconds, year 10000) and dictionaries whose
    categories differ between row groups are carried into Parquet as they are."""
    nanos = pa.array([1_234_567_891, 1_234_567_000], pa.time64("ns"))
    far = pa.array([253_402_300_800_000_000, 0], pa.timestamp("us"))  # 10000-01-01, 1970
    path = tmp_path / "typed.parquet"
    with pq.ParquetWriter(path, pa.schema([("id", pa.time64("ns")), ("text", pa.string()),
                                           ("when", pa.timestamp("us")),
                                           ("kind", pa.dictionary(pa.int8(), pa.string()))])) \
            as writer:
        for group in range(3):  # 100 categories each: 300 in all, beyond int8
            kinds = pa.array([f"kind {group * 100 + n}" for n in range(2)]).dictionary_encode()
            kinds = pa.DictionaryArray.from_arrays(
                kinds.indices.cast(pa.int8()),
                pa.array([f"kind {group * 100 + n}" for n in range(100)]))
            writer.write_table(pa.table({"id": nanos, "text": ["one two", "three"], "when": far,
                                         "kind": kinds}))
    out = tmp_path / "out.parquet"
    result = run_chunkd("--input", "parquet", str(path), "--format", "parquet",
                        "--output", str(out))
    assert (result.returncode, result.stderr) == (0, b"")
    written = pq.read_table(out)
    assert written.column("doc").type == pa.time64("ns")
    assert written.column("doc").to_pylist() == [nanos[0].as_py(), nanos[1].as_py()] * 3
    assert written.column("doc").cast(pa.int64()).to_pylist() == [1_234_567_891, 1_234_567_000] * 3
    assert written.column("when").cast(pa.int64()).to_pylist() == [
        253_402_300_800_000_000, 0] * 3
    assert written.column("kind").to_pylist() == [f"kind {g * 100 + n}" for g in range(3)
                                                  for n in range(2)]


def test_an_input_whose_name_is_not_utf8_is_read(tmp_path):
    """Names are bytes: pyarrow's own files take only text, so Python opens the file."""
    path = os.path.join(os.fsencode(tmp_path), b"caf\xe9.parquet")
    with open(path, "wb") as stream:
        pq.write_table(pa.table({"id": ["a"], "text": ["some text"]}), stream)
    result = run_chunkd("--input", "parquet", os.fsdecode(path))
    assert (result.returncode, result.stderr) == (0, b"")
    assert [(r["doc"], r["text"]) for r in ndjson(result.stdout)] == [("a", "some text")]


def test_files_whose_columns_differ_only_in_nullability_fit_together(tmp_path):
    strict = pa.schema([pa.field("id", pa.string(), nullable=False),
                        pa.field("text", pa.string(), nullable=False),
                        pa.field("lang", pa.string(), nullable=False)])
    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["one"], "lang": ["en"]}, schema=strict), first)
    pq.write_table(pa.table({"id": ["b"], "text": ["two"], "lang": pa.array([None], pa.string())}),
                   second)
    out = tmp_path / "out.parquet"
    result = run_chunkd("--input", "parquet", str(first), str(second), "--format", "parquet",
                        "--output", str(out))
    assert (result.returncode, result.stderr) == (0, b"")
    assert [(r["doc"], r["text"], r["lang"]) for r in read_rows(out)] == [
        ("a", "one", "en"), ("b", "two", None)]


def test_a_run_that_reads_no_document_leaves_the_output_as_it_was(tmp_path):
    out = tmp_path / "out.parquet"
    pq.write_table(pa.table({"doc": ["kept"]}), out)
    before = out.read_bytes()
    result = run_chunkd("--input", "parquet", str(tmp_path / "mistyped.parquet"),
                        "--format", "parquet", "--output", str(out))
    assert result.returncode == 1
    assert out.read_bytes() == before and leftovers(tmp_path) == []
    empty = tmp_path / "empty.parquet"  # no rows is no error: the output is replaced
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
                   empty)
    result = run_chunkd("--input", "parquet", str(empty), "--format", "parquet",
                        "--output", str(out))
    assert (result.returncode, result.stderr) == (0, b"")
    assert pq.read_table(out).num_rows == 0 and "text" in pq.read_schema(out).names


TEXT_TYPES = [pa.string(), pa.large_string(), pa.string_view(), pa.binary(),
              pa.large_binary(), pa.binary_view(), pa.dictionary(pa.int32(), pa.string())]


@pytest.mark.parametrize("kind", TEXT_TYPES, ids=str)
def test_every_text_type_gives_the_chunks_of_its_strings(tmp_path, kind):
    """The text's bytes are read from Arrow's buffers and decoded a block at a time:
    whatever the column's type, a document whose characters straddle the blocks (and
    the nulls and rows around it) gives the chunks its string gives."""
    long = "".join(f"{n} 𝔘𝔫𝔦 — 中文。\n" for n in range(40_000))  # over a MB, 4-byte characters
    texts = ["first", None, long, "", "last é"]
    values = pa.array([None if t is None else t.encode() for t in texts], pa.binary())
    column = (values.cast(pa.string()).dictionary_encode() if pa.types.is_dictionary(kind)
              else values.cast(kind) if kind in (pa.binary(), pa.large_binary(), pa.binary_view())
              else values.cast(pa.string()).cast(kind))
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"id": range(len(texts)), "text": column}), path)
    assert pq.read_schema(path).field("text").type == kind
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": range(len(texts)), "text": texts}), plain)
    result = run_chunkd("--input", "parquet", str(path), "--chars", "300", "--overlap", "50")
    expected = run_chunkd("--input", "parquet", str(plain), "--chars", "300", "--overlap", "50")
    assert result.returncode == expected.returncode == 1
    assert result.stderr.decode() == f"chunkd: {path}: row 1 (id 1): the text is null\n"
    records = ndjson(result.stdout)
    assert records == ndjson(expected.stdout)
    assert {r["doc"] for r in records} == {0, 2, 4}
    assert all(texts[r["doc"]][r["start"]:r["end"]] == r["text"] for r in records)


def test_without_proc_the_file_is_read_through_python(tmp_path, monkeypatch):
    """Where there is no /proc to open a file again by its number, Arrow reads it
    through the Python file chunkd opened."""
    import chunkd.outputs.parquet
    monkeypatch.setattr(chunkd.outputs.parquet, "PROC_DESCRIPTORS", None)
    path = os.path.join(os.fsencode(tmp_path), b"caf\xe9.parquet")
    with open(path, "wb") as stream:
        pq.write_table(pa.table({"id": ["a", "b"], "text": ["some text", "more"]}), stream)
    files = chunkd.outputs.parquet.ParquetFiles(argparse.Namespace(
        text_column=None, id_column=None, input="parquet", format="ndjson", output=None,
        files=[os.fsdecode(path)], max_bytes=1 << 20, extract_timeout=60.0),
        "strict")
    documents = list(files.documents(os.fsdecode(path)))
    assert [(d.name, "".join(d.blocks)) for d in documents] == [("a", "some text"), ("b", "more")]


def test_a_pipe_is_refused_at_once_and_a_closed_stdout_does_not_matter(tmp_path):
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["some text"]}), source)
    fifo = tmp_path / "fifo.parquet"
    os.mkfifo(fifo)  # nobody writes it: reading it would wait forever
    out = tmp_path / "out.parquet"
    result = subprocess.run([chunkd_command(), "--input", "parquet", str(fifo), str(source),
                             "--format", "parquet", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=HANG,
                            preexec_fn=lambda: os.close(1))  # stdout closed: not needed
    assert result.returncode == 1
    assert result.stderr.decode() == (f"chunkd: {fifo}: not a regular file (Parquet is read "
                                      "from its end: it cannot come from a pipe)\n")
    assert [r["text"] for r in read_rows(out)] == ["some text"]


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["INT", "TERM", "HUP"])
def test_a_signal_ends_a_run_waiting_for_its_fifos_reader(tmp_path, number):
    """A FIFO as --output waits for a reader, as a shell's ``>`` does; a signal ends the
    wait (Arrow's own open ignored them all: only SIGKILL ended it)."""
    text = tmp_path / "a.txt"
    text.write_text("some text to chunk")
    fifo = tmp_path / "out.parquet"
    os.mkfifo(fifo)
    process = subprocess.Popen([chunkd_command(), "--format", "parquet", "--output", str(fifo),
                                str(text)], stderr=subprocess.PIPE, start_new_session=True)
    wchan = f"/proc/{process.pid}/wchan"
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline and open(wchan).read() != "wait_for_partner":
        time.sleep(0.05)   # the kernel's name for a FIFO's open waiting for the other end
    assert open(wchan).read() == "wait_for_partner", "it never waited for the reader"
    os.killpg(process.pid, number)   # as a terminal's Ctrl-C reaches the process group
    assert process.wait(timeout=HANG) == (130 if number == signal.SIGINT else -number)
    assert process.stderr.read() == b""


def test_parquet_to_stdout_that_is_a_pipe(tmp_path):
    """``--output /dev/stdout`` into a pipe: its real path (/proc/PID/fd/pipe:[N]) names
    nothing, so the rows go to the path as given."""
    text = tmp_path / "a.txt"
    text.write_text("some text to chunk")
    done = subprocess.run([chunkd_command(), "--format", "parquet", "--output", "/dev/stdout",
                           str(text)], capture_output=True, timeout=HANG)
    assert (done.returncode, done.stderr) == (0, b"")
    assert pq.read_table(pa.BufferReader(done.stdout)).to_pylist()[0]["text"] == \
        "some text to chunk"


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_run_killed_by_a_signal_leaves_no_hidden_file(tmp_path, number):
    out = tmp_path / "out.parquet"
    process = subprocess.Popen([chunkd_command(), "--format", "parquet", "--output", str(out)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    process.stdin.write(b"some text to chunk. " * 1000)
    process.stdin.flush()  # stdin stays open: the run is in the middle of its input
    deadline = time.monotonic() + HANG
    while not leftovers(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(tmp_path), "the hidden output file never appeared"
    process.send_signal(number)
    assert process.wait(timeout=HANG) == -number
    process.stdin.close()
    assert process.stderr.read() == b""
    assert leftovers(tmp_path) == [] and not out.exists()


def test_a_run_under_nohup_goes_on_after_a_hangup(tmp_path):
    """SIGHUP ignored when the run starts (``nohup``, a terminal closed behind it): the
    run goes on and writes its file whole (the hidden file was removed and the run
    ended)."""
    out = tmp_path / "out.parquet"
    process = subprocess.Popen([chunkd_command(), "--format", "parquet", "--output", str(out)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    process.stdin.write(b"some text to chunk. " * 1000)
    process.stdin.flush()
    deadline = time.monotonic() + HANG
    while not leftovers(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(tmp_path), "the hidden output file never appeared"
    process.send_signal(signal.SIGHUP)
    process.stdin.write(b"more text. " * 1000)
    process.stdin.close()
    assert process.wait(timeout=HANG) == 0
    assert process.stderr.read() == b""
    assert leftovers(tmp_path) == []
    assert "".join(row["text"] for row in read_rows(out)).endswith("more text.")


@pytest.mark.slow
def test_a_large_carried_column_is_written_in_bounded_memory(tmp_path):
    """Every chunk row of a document carries its columns: a MiB of them a row must
    not pile up in memory, unconverted, until a MiB of chunk text has."""
    raw = os.urandom(1 << 20)
    path = tmp_path / "carried.parquet"
    pq.write_table(pa.table({"id": [str(n) for n in range(24)], "text": ["word " * 1000] * 24,
                             "raw": [raw] * 24}), path, write_batch_size=1)
    out = tmp_path / "out.parquet"
    result = subprocess.run([sys.executable, "-c", MEASURE, chunkd_command(), "--input",
                             "parquet", str(path), "--chars", "200", "--format", "parquet",
                             "--output", str(out)], capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    peak_mb = int(result.stderr.split()[-1])
    written = pq.read_table(out, columns=["doc", "raw"])
    assert written.num_rows == 24 * 28 and written.column("raw")[-1].as_py() == raw
    # 298 MB here, 340 MB for 72 rows (row groups of 32 MiB, and Arrow's writer); 866 MB
    # when a block waited for a MiB of chunk text.
    assert peak_mb < 400, f"peak RSS {peak_mb} MB"


def test_parquet_output_through_a_link_replaces_its_target_and_keeps_its_mode(tmp_path):
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["private text"]}), source)
    target = tmp_path / "target.parquet"
    target.write_bytes(b"old")
    target.chmod(0o600)
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    result = run_chunkd("--input", "parquet", str(source), "--format", "parquet",
                        "--output", str(link))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and read_rows(target)[0]["text"] == "private text"
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("columns,args,message", [
    ({"body": ["x"]}, [], "no text column 'text' (columns: body)"),
    ({"text": [1]}, [], "the text column 'text' holds int64, not strings"),
    ({"text": ["x"]}, ["--id-column", "url"], "no id column 'url' (columns: text)"),
    ({"text": ["x"], "length": [3]}, [],
     "column 'length' is reserved for chunk records; rename it"),
    ({"text": ["x"], "chunks": [3]}, [],  # --format json's key for a document's chunks
     "column 'chunks' is reserved for chunk records; rename it"),
])
def test_unusable_columns_are_one_error(tmp_path, columns, args, message):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    result = run_chunkd("--input", "parquet", str(path), *args)
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr.decode() == f"chunkd: {path}: {message}\n"


def test_columns_json_cannot_hold_need_parquet_output(tmp_path):
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"text": ["some text"], "raw": pa.array([b"\x00"], pa.binary())}), path)
    result = run_chunkd("--input", "parquet", str(path))
    assert result.returncode == 1
    assert result.stderr.decode() == (f"chunkd: {path}: column 'raw' holds binary, which JSON "
                                      "and msgpack records cannot hold; use --format parquet\n")
    out = tmp_path / "out.parquet"
    result = run_chunkd("--input", "parquet", str(path), "--format", "parquet",
                        "--output", str(out))
    assert result.returncode == 0
    assert read_rows(out)[0]["raw"] == b"\x00"


@pytest.mark.parametrize("args,message", [
    (["--format", "parquet"], "--format parquet needs --output FILE"),
    (["--output", "x.parquet"], "--output is for --format parquet"),
    (["--input", "parquet"], "--input parquet reads FILEs, not stdin"),
    (["--input", "parquet", "-"], "--input parquet reads FILEs, not stdin"),
    (["--text-column", "body"], "--text-column and --id-column are for --input parquet"),
    (["--input", "ndjson", "--format", "parquet", "--output", "x.parquet"],
     "--format parquet takes --input text or parquet"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    result = run_chunkd(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[-1].startswith(f"chunkd: error: {message}")
    assert os.listdir(tmp_path) == []


def test_output_errors_are_one_line_and_leave_nothing_behind(tmp_path):
    text = ("words and more words. " * 5000).encode()
    full = run_chunkd("--format", "parquet", "--output", "/dev/full", input=text)
    assert full.returncode == 1
    assert full.stderr.decode() == "chunkd: /dev/full: No space left on device\n"
    missing = run_chunkd("--format", "parquet", "--output", str(tmp_path / "no" / "x.parquet"),
                         input=text)
    assert missing.returncode == 1
    assert missing.stderr.decode() == (f"chunkd: {tmp_path}/no/x.parquet: "
                                       "No such file or directory\n")


def test_a_name_that_is_not_utf8_is_an_error_for_parquet(tmp_path):
    odd = os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")
    with open(odd, "wb") as stream:
        stream.write(b"odd name")
    good = tmp_path / "good.txt"
    good.write_text("good name")
    out = tmp_path / "out.parquet"
    result = run_chunkd(os.fsdecode(odd), str(good), "--format", "parquet", "--output", str(out))
    assert result.returncode == 1
    assert result.stderr.decode() == (f"chunkd: {tmp_path}/caf\\xe9.txt: the name is not UTF-8, "
                                      "which the doc column (a Parquet string) cannot hold\n")
    assert [(r["doc"], r["text"]) for r in read_rows(out)] == [(str(good), "good name")]


# --- bounded memory ------------------------------------------------------------------

TEXT_BYTES = 1 << 30
PEAK_LIMIT_MB = 256

# Linux counts a child's memory from before its exec (a copy of the test process, large
# here) in its peak RSS, so chunkd is started from a small Python that reports the peak.
MEASURE = """import resource, subprocess, sys
status = subprocess.call(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(status)"""


def write_big_parquet(path) -> tuple[int, int]:
    """At least 1 GiB of distinct corpus text in two row groups of over 500 MB each
    (far over the memory bound: a reader that holds a row group fails), documents of
    1 to 20 KB and a few of 8 MB; uncompressed. Returns (documents, text bytes)."""
    text = "\n\n".join(row["text"] for row in corpus_rows())
    rng = random.Random(12)
    half = TEXT_BYTES // 2 + (1 << 20)
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    documents = total = 0
    with pq.ParquetWriter(path, schema, compression="none", use_dictionary=False) as writer:
        for _ in range(2):
            texts, size = [], 0
            while size < half:
                length = 8_000_000 if rng.random() < 0.00005 else rng.randint(1_000, 20_000)
                start = rng.randrange(len(text) - 20_000)
                body = f"document {documents + len(texts)}\n" + (
                    text[start:start + length] if length < 20_000 else
                    (text * (length // len(text) + 1))[start:start + length])
                texts.append(body)
                size += len(body.encode())
            writer.write_table(pa.table({"id": range(documents, documents + len(texts)),
                                         "text": texts}, schema=schema),
                               row_group_size=len(texts))
            documents += len(texts)
            total += size
            del texts
    return documents, total


@pytest.mark.slow
def test_a_gigabyte_of_parquet_is_chunked_in_bounded_memory(tmp_path):
    source = tmp_path / "big.parquet"
    documents, text_bytes = write_big_parquet(source)
    assert text_bytes >= TEXT_BYTES and pq.ParquetFile(source).metadata.num_row_groups == 2
    out = tmp_path / "chunks.parquet"
    result = subprocess.run([sys.executable, "-c", MEASURE, chunkd_command(), "--input",
                             "parquet", str(source), "--format", "parquet", "--output", str(out)],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    peak_mb = int(result.stderr.split()[-1])
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"
    written = pq.read_table(out, columns=["doc", "index", "length"])
    assert len(set(written.column("doc").to_pylist())) == documents  # every document chunked
    assert written.num_rows > text_bytes // 1100


def test_without_pyarrow_parquet_options_are_a_usage_error(tmp_path):
    code = ("import sys; sys.modules['pyarrow'] = None; from chunkd.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "--input", "parquet", "x.parquet"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "chunkd: error: Parquet needs pyarrow: " + install_command("arrow"))

