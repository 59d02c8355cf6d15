"""The chunkd filter, run as a subprocess: input modes, formats, errors, exit codes."""

from __future__ import annotations

import subprocess

import msgpack
import orjson
import pytest

from chunkd import split_text
from command import HANG, chunkd_command, ndjson, run_chunkd
from oracle import corpus_documents, langchain_chunks

ENGLISH = next(p for p in corpus_documents() if p.parent.name == "en-rustbook")
CHINESE = next(p for p in corpus_documents() if p.parent.name == "zh-vuedocs")


def test_stdin_tokens_matches_langchain():
    text = ENGLISH.read_text(encoding="utf-8")
    result = run_chunkd("--tokens", "300", input=text.encode())
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    assert [r["text"] for r in records] == langchain_chunks(text, 300, 30, "tokens")
    assert [r["index"] for r in records] == list(range(len(records)))
    assert all(set(r) == {"index", "start", "end", "length", "text"} for r in records)
    assert all(text[r["start"]:r["end"]] == r["text"] for r in records)


#: Modules the plain filter has no use for, imported only where they are needed (each
#: takes milliseconds at every start): the temporary files of whole-document formats,
#: tiktoken's cache and library, what help or OCR alone use, and shutil (with bz2 and
#: lzma), which argparse imports for the terminal's width; the embedders' module (the
#: options that name a model are declared without it).
NOT_AT_START = {"tempfile", "importlib.resources", "tiktoken", "base64", "textwrap", "glob",
                "queue", "shutil", "bz2", "lzma", "signal", "importlib.util",
                "chunkd.kernel._windows", "chunkd.kernel.twin.windows", "chunkd.kernel._code", "select",
                "chunkd.embeddings.models"}
#: And in code points: what an embeddings endpoint and token files alone use (pathlib
#: imports fnmatch), and the zlib that the token counter's tables are stored in.
NOT_AT_START_CHARS = {"urllib.parse", "pathlib", "fnmatch", "zlib"}
#: And with the compiled core, whose writer writes the records: orjson, which the twin
#: writer and JSON-lines input use, and what it imports: uuid, json and dataclasses
#: (with the ``inspect`` that dataclasses imports, about a fifth of the start-up until
#: no class that start-up makes was a dataclass); the twin's recursive splitter; and
#: threading, which the embedders use and the twin's ``regex`` package imports.
NOT_AT_START_COMPILED = {"orjson", "uuid", "json", "dataclasses", "inspect",
                         "chunkd.kernel.twin.recursive", "threading"}


@pytest.mark.parametrize("options", [("--chars", "300"), ("--tokens", "100")])
def test_a_plain_run_imports_only_what_it_uses(options):
    """The command on Markdown, in code points or cl100k_base tokens, as Python records
    its imports (``-X importtime``): the records are LangChain's, and none of
    ``NOT_AT_START`` was imported; with ``--ids``, hashing and orjson are. It runs
    without ``site`` (``-S``), chunkd and the site packages on its path, as a regular
    install imports them: the import hook of an editable install, as a development
    environment has, would import pathlib and urllib before chunkd starts."""
    import pathlib
    import sys
    import sysconfig

    import chunkd
    from chunkd.kernel.chosen import IMPLEMENTATION

    text = ENGLISH.read_text(encoding="utf-8")[:20000]
    unused = NOT_AT_START | (NOT_AT_START_COMPILED if IMPLEMENTATION == "compiled" else set())
    unused |= NOT_AT_START_CHARS if options[0] == "--chars" else set()
    path = [str(pathlib.Path(chunkd.__file__).parent.parent), sysconfig.get_paths()["purelib"]]
    main = f"import sys; sys.path[:0] = {path!r}; import chunkd.cli; sys.exit(chunkd.cli.main())"

    def run(*extra: str) -> tuple[list[dict], set[str]]:
        done = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", main,
                               *options, *extra], input=text.encode(), capture_output=True,
                              timeout=HANG)
        assert done.returncode == 0, done.stderr[-2000:]
        imported = {line.rpartition(b"|")[2].strip().decode()
                    for line in done.stderr.splitlines() if line.startswith(b"import time:")}
        return ndjson(done.stdout), imported

    records, imported = run()
    size = int(options[1])
    assert [r["text"] for r in records] == langchain_chunks(text, size, size // 10, options[0][2:])
    assert "chunkd.inputs.readers" in imported and not unused & imported
    records, imported = run("--ids")
    assert all(len(r["chunk_id"]) == 36 for r in records)
    assert {"hashlib", "orjson"} <= imported


@pytest.mark.parametrize("columns", [None, "57", "0", "-3", "wide"])
def test_help_is_as_wide_as_shutil_says(monkeypatch, columns):
    """Help's width is found without shutil (``NOT_AT_START``), as shutil finds it:
    ``COLUMNS`` where it is a positive number, else the terminal's (none here: 80)."""
    import shutil

    from chunkd.settings import LineFormatter

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert LineFormatter("chunkd")._width == shutil.get_terminal_size().columns - 2


@pytest.mark.parametrize("stdout", [None, object()], ids=["none", "no-fileno"])
def test_help_without_a_standard_output_is_as_wide_as_shutil_says(monkeypatch, stdout):
    """Without an original stdout, or with one that has no descriptor, the width is
    shutil's fallback, as it is for shutil (no error)."""
    import shutil

    from chunkd.settings import LineFormatter

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.__stdout__", stdout)
    assert LineFormatter("chunkd")._width == shutil.get_terminal_size().columns - 2 == 78


def test_a_caller_in_process_keeps_its_garbage_collector(tmp_path, capsys):
    """The command freezes what start-up made (``cli._imported``); a program or test
    that calls ``main`` with its arguments keeps its collector as it was: on, with
    nothing more frozen, and collecting what it leaves behind."""
    import gc
    import weakref

    from chunkd import cli

    document = tmp_path / "a.txt"
    document.write_text("one two three\n\nfour five six", encoding="utf-8")

    class Cycle:
        pass

    cycle = Cycle()
    cycle.itself = cycle  # collectable only by the collector
    gone = weakref.ref(cycle)
    del cycle
    frozen = gc.get_freeze_count()
    assert cli.main(["--chars", "10", "--overlap", "0", str(document)]) == 0
    assert [r["text"] for r in ndjson(capsys.readouterr().out.encode())] == [
        "one two", "three", "four five", "six"]
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.collect()
    assert gone() is None


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc",
                    reason="the heap's padding is glibc's setting")
def test_the_command_pads_its_heap_and_a_caller_gets_the_same_records(tmp_path):
    """The command pads its C heap (``cli.HEAP_PAD``): chunking the corpus, English and
    Chinese, repeated to 20 MB costs it a third of the page faults, or fewer, that the
    same command costs unpadded (``HEAP_PAD = 0``); a caller of ``cli.main`` in process,
    whose allocator is left as it was, gets the same records. (Text in one script alone
    shows no difference: its blocks, all of one size, are served again without a fault
    either way; and a caller's faults, 1.8 to 6.4 times the padded command's in runs on
    one machine, depend on the heap as it finds it.)"""
    import os
    import sys

    from chunkd.kernel.chosen import pad_heap

    if pad_heap is None:
        pytest.skip("the twin runs: no compiled core to pad the heap with")
    text = tmp_path / "book.txt"
    corpus = "".join(path.read_text(encoding="utf-8") for path in corpus_documents())
    text.write_text(corpus * (20_000_000 // len(corpus.encode())), encoding="utf-8")

    def faults(code: str, stdin: str) -> tuple[int, bytes]:
        """The minor page faults of a run of ``code`` and its output."""
        with open(stdin, "rb") as source:
            process = subprocess.Popen([sys.executable, "-c", code, "--chars", "1000"],
                                       stdin=source, stdout=subprocess.PIPE)
            output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        return usage.ru_minflt, output

    def past_start(code: str) -> tuple[int, bytes]:
        chunked, output = faults(code, str(text))
        return chunked - faults(code, os.devnull)[0], output

    padded, records = past_start("import sys, chunkd.cli; sys.exit(chunkd.cli.main())")
    unpadded, _ = past_start("import sys, chunkd.cli as c; c.HEAP_PAD = 0; sys.exit(c.main())")
    assert 3 * padded < unpadded
    caller = "import sys, chunkd.cli; sys.exit(chunkd.cli.main(sys.argv[1:]))"
    assert records == past_start(caller)[1]


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc",
                    reason="the heap's padding is glibc's setting")
def test_a_padded_heap_serves_blocks_again_without_faults():
    """Padding the heap keeps blocks under 256 KiB in it (``pad_heap`` sets glibc's
    mmap threshold too, which padding alone freezes at 128 KiB): allocated, written
    and freed again and again, they cost no new page faults. In a process of its own:
    the allocator's settings are the whole process's."""
    import sys

    from chunkd.kernel.chosen import pad_heap

    if pad_heap is None:
        pytest.skip("the twin runs: no compiled core to pad the heap with")
    program = """if True:
        import resource, sys
        from chunkd.kernel.chosen import pad_heap
        assert pad_heap(16 << 20)
        faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for size in (130 << 10, 200 << 10, 250 << 10):
            block = bytearray(size)
            del block
            before = faults()
            for _ in range(50):
                block = bytearray(size)
                block[::4096] = b"x" * len(block[::4096])
                del block
            print(size, (faults() - before) / 50)
    """
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    per_block = dict(map(float, line.split()) for line in done.stdout.splitlines())
    assert len(per_block) == 3 and all(faults < 1 for faults in per_block.values()), per_block


def test_default_is_1000_chars_with_10_percent_overlap():
    text = CHINESE.read_text(encoding="utf-8")
    records = ndjson(run_chunkd(input=text.encode()).stdout)
    assert [r["text"] for r in records] == langchain_chunks(text, 1000, 100, "chars")


def test_output_is_utf8_without_ascii_escapes():
    result = run_chunkd("--chars", "50", input="中文。句子！".encode())
    assert "中文。".encode() in result.stdout
    assert b"\\u" not in result.stdout


def test_files_are_documents_named_by_path(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.md"
    a.write_text("first document. " * 20, encoding="utf-8")
    b.write_text("second one\n\nwith two paragraphs", encoding="utf-8")
    result = run_chunkd("--chars", "100", "--overlap", "0", str(a), str(b))
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    for path in (a, b):
        mine = [r for r in records if r["doc"] == str(path)]
        expected = langchain_chunks(path.read_text(encoding="utf-8"), 100, 0, "chars")
        assert [r["text"] for r in mine] == expected
    assert [r["doc"] for r in records] == sorted(r["doc"] for r in records)  # input order


def test_ndjson_input_passes_other_fields_through():
    lines = [{"id": "doc-1", "text": "alpha beta gamma delta", "url": "https://x"},
             {"text": "no id here, so the line number names it"}]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    records = ndjson(run_chunkd("--input", "ndjson", "--chars", "12", "--overlap", "0",
                                input=data).stdout)
    first = [r for r in records if r["doc"] == "doc-1"]
    assert [r["text"] for r in first] == langchain_chunks(lines[0]["text"], 12, 0, "chars")
    assert all(r["url"] == "https://x" for r in first)
    assert {r["doc"] for r in records} == {"doc-1", 2}


def test_json_format_one_document_a_line(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("Some text. More text! " * 30, encoding="utf-8")
    result = run_chunkd("--format", "json", "--chars", "80", str(path), str(path))
    documents = ndjson(result.stdout)
    assert len(documents) == 2
    expected = [{"index": c.index, "start": c.start, "end": c.end, "length": c.length,
                 "text": c.text} for c in split_text(path.read_text(), 80, 8)]
    assert documents[0] == {"doc": str(path), "chunks": expected}


def test_msgpack_format_has_the_ndjson_keys():
    text = "one two three four five six seven eight nine ten " * 10
    as_json = ndjson(run_chunkd("--chars", "40", input=text.encode()).stdout)
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(run_chunkd("--chars", "40", "--format", "msgpack", input=text.encode()).stdout)
    assert list(unpacker) == as_json


def test_empty_input_gives_no_chunks_and_success():
    result = run_chunkd(input=b"")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


def test_invalid_utf8_names_the_byte_offset():
    result = run_chunkd(input="héllo wörld ".encode() * 3 + b"\xff tail")
    assert result.returncode == 1
    offset = len("héllo wörld ".encode() * 3)
    assert result.stderr.decode().strip() == (
        f"chunkd: stdin: invalid UTF-8 at byte {offset} "
        "(use --errors replace to substitute U+FFFD)")


def test_invalid_utf8_straddling_blocks_names_the_byte_offset(tmp_path):
    path = tmp_path / "big.txt"
    good = ("é" * 200_000).encode()  # 400,000 bytes: crosses the reader's block size
    path.write_bytes(good + b"\xe9\x80" + b"x")   # a truncated 3-byte sequence
    result = run_chunkd(str(path))
    assert result.returncode == 1
    assert f"{path}: invalid UTF-8 at byte {len(good)}" in result.stderr.decode()


def test_errors_replace_substitutes_u_fffd():
    result = run_chunkd("--errors", "replace", input=b"ab\xffcd")
    assert result.returncode == 0
    assert ndjson(result.stdout)[0]["text"] == "ab\ufffdcd"


def test_malformed_ndjson_names_the_line_and_goes_on():
    data = b'{"text": "good"}\n{"text": broken\n[1]\n{"text": "also good"}\n'
    result = run_chunkd("--input", "ndjson", input=data)
    assert result.returncode == 1
    errors = result.stderr.decode().splitlines()
    assert errors[0].startswith("chunkd: stdin: line 2: malformed JSON")
    assert errors[1] == "chunkd: stdin: line 3: expected a JSON object"
    assert [r["text"] for r in ndjson(result.stdout)] == ["good", "also good"]


def test_missing_file_is_named_and_the_others_are_chunked(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("still chunked", encoding="utf-8")
    result = run_chunkd(str(tmp_path / "missing.txt"), str(good))
    assert result.returncode == 1
    assert result.stderr.decode() == f"chunkd: {tmp_path / 'missing.txt'}: No such file or directory\n"
    assert [r["text"] for r in ndjson(result.stdout)] == ["still chunked"]


@pytest.mark.parametrize("args", [
    ["--chars", "100", "--overlap", "100"],
    ["--chars", "100", "--tokens", "50"],
    ["--chars", "0"],
    ["--tokens", "ten"],
    ["--overlap", "-1"],
    ["--format", "xml"],
])
def test_usage_errors_exit_2_without_traceback(args):
    result = run_chunkd(*args)
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert result.stderr.decode().splitlines()[-1].startswith("chunkd: error: ")


def test_quiet_exit_when_the_reader_goes_away():
    text = ("A sentence that repeats. " * 40 + "\n\n") * 20_000  # about 20 MB
    pipeline = subprocess.run(
        f"set -o pipefail; '{chunkd_command()}' --chars 200 | head -1", shell=True, input=text.encode(),
        capture_output=True, timeout=HANG, executable="/bin/bash")
    assert pipeline.returncode == 0
    assert pipeline.stderr == b""
    assert len(ndjson(pipeline.stdout)) == 1


def test_version_and_help():
    assert run_chunkd("--version").stdout.decode().startswith("chunkd ")
    help_text = run_chunkd("--help").stdout.decode()
    for option in ("--chars", "--tokens", "--overlap", "--input", "--format", "--errors"):
        assert option in help_text


def test_jobs_spread_documents_and_keep_input_order(tmp_path):
    paths = []
    for number, document in enumerate(corpus_documents()[::8]):
        path = tmp_path / f"{number:03}.md"
        path.write_bytes(document.read_bytes())
        paths.append(str(path))
    paths.insert(5, str(tmp_path / "missing.md"))
    one = run_chunkd("--tokens", "100", "--jobs", "1", *paths)
    two = run_chunkd("--tokens", "100", "--jobs", "2", *paths)
    assert one.returncode == two.returncode == 1
    assert one.stderr == two.stderr
    assert one.stdout == two.stdout
    assert [r["doc"] for r in ndjson(two.stdout)] == sorted(r["doc"] for r in ndjson(two.stdout))


def test_jobs_with_ndjson_input_keep_line_order():
    lines = [orjson.dumps({"id": n, "text": f"document {n}. " * (n % 50 + 1)})
             for n in range(300)]
    data = b"\n".join(lines[:100] + [b"{broken"] + lines[100:]) + b"\n"
    one = run_chunkd("--input", "ndjson", "--chars", "100", "--jobs", "1", input=data)
    two = run_chunkd("--input", "ndjson", "--chars", "100", "--jobs", "2", input=data)
    assert (one.stdout, one.stderr, one.returncode) == (two.stdout, two.stderr, two.returncode)
    assert two.stderr.decode().startswith("chunkd: stdin: line 101: malformed JSON")


def run_on_a_terminal(*args: str) -> tuple[int, bytes]:
    """Run chunkd on a large stdin with its stderr on a pseudo-terminal."""
    import os
    import pty

    import time

    controller, terminal = pty.openpty()
    block = ("A long enough line of text to chunk. " * 30 + "\n\n").encode() * 1000
    process = subprocess.Popen([chunkd_command(), *args], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    for _ in range(20):  # at least a second of input, so that progress is due
        process.stdin.write(block)
        process.stdin.flush()
        time.sleep(0.05)
    process.communicate(timeout=HANG)
    seen = b""
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not data:
            break
        seen += data
    os.close(controller)
    return process.returncode, seen


def test_progress_on_a_terminal_and_quiet():
    status, shown = run_on_a_terminal("--chars", "500")
    assert status == 0
    assert b"chunkd: " in shown and b"MB/s" in shown
    status, shown = run_on_a_terminal("--chars", "500", "--quiet")
    assert (status, shown) == (0, b"")


def test_the_pipes_it_streams_through_are_widened_and_the_records_unchanged(tmp_path):
    """stdin and stdout that are pipes get a 1 MiB buffer (Linux's default is 64 KiB),
    so that chunkd and the processes at their other ends switch less; the records are
    the same as between files."""
    import fcntl
    import os
    import threading

    # Over four times a default pipe: the write ends only after chunkd has read from
    # stdin, which it widens first.
    document = tmp_path / "in.md"
    document.write_bytes(corpus_documents()[0].read_bytes() * (1 + (1 << 18) // len(
        corpus_documents()[0].read_bytes())))
    # A user past their pipe quota gets small pipes and no wider one: then chunkd
    # leaves them as they are.
    scratch = os.pipe()
    try:
        fcntl.fcntl(scratch[1], fcntl.F_SETPIPE_SZ, 1 << 20)
        widened = 1 << 20
    except PermissionError:
        widened = fcntl.fcntl(scratch[1], fcntl.F_GETPIPE_SZ)
    finally:
        os.close(scratch[0])
        os.close(scratch[1])
    process = subprocess.Popen([chunkd_command(), "--chars", "300"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    sizes = {}

    def feed() -> None:
        process.stdin.write(document.read_bytes())
        process.stdin.flush()
        sizes["stdin"] = fcntl.fcntl(process.stdin.fileno(), fcntl.F_GETPIPE_SZ)
        process.stdin.close()

    writer = threading.Thread(target=feed)
    writer.start()
    out = process.stdout.read()
    writer.join()
    # The size is the pipe's, seen from either end: chunkd widened both.
    sizes["stdout"] = fcntl.fcntl(process.stdout.fileno(), fcntl.F_GETPIPE_SZ)
    process.stdout.close()
    assert process.wait(timeout=HANG) == 0
    assert sizes == {"stdin": widened, "stdout": widened}
    with open(document, "rb") as stdin, open(tmp_path / "out", "wb") as stdout:
        subprocess.run([chunkd_command(), "--chars", "300"], stdin=stdin, stdout=stdout,
                       check=True, timeout=HANG)
    assert out == (tmp_path / "out").read_bytes() and out.count(b"\n") > 10
