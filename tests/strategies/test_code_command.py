"""The code strategy through the installed ``chunkd``: the filter on files of several
languages (each by its extension or shebang), a missing grammar, bad input, refused
options, ``chunkd watch`` on a folder of mixed files, preview, serve, eval and Arrow."""

from __future__ import annotations

import json
import os
import random
import subprocess

import orjson
import pytest

from browser import Serve, request
from command import HANG, chunkd_command, ndjson, records_with_jobs, run_chunkd, with_faults
from watching import filter_chunks, results

FILES = {
    "app.py": "import os\n\n\nclass App:\n    def run(self):\n        return os.getcwd()\n",
    "web.js": "// Greets.\nfunction greet(name) {\n  return `héllo ${name}`;\n}\n",
    "main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "lib.rs": "#[derive(Debug)]\npub struct P { x: f64 }\n\nimpl P {\n    pub fn x(&self) -> f64 { self.x }\n}\n",
    "tool": "#!/usr/bin/env python3\nprint('tool')\n",
    "notes.txt": "Plain notes, cut as text.\n",
}
LANGUAGES = {"app.py": "python", "web.js": "javascript", "main.go": "go", "lib.rs": "rust",
             "tool": "python", "notes.txt": None}


def written(folder, files=FILES) -> list[str]:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [str(folder / name) for name in files]


def check_records(records: list[dict], folder) -> None:
    """Each file's chunks are its slices, tile it, and carry its language."""
    by_doc: dict[str, list[dict]] = {}
    for record in records:
        by_doc.setdefault(os.path.basename(record["doc"]), []).append(record)
    assert sorted(by_doc) == sorted(FILES)
    for name, chunks in by_doc.items():
        text = (folder / name).read_text(encoding="utf-8")
        assert "".join(chunk["text"] for chunk in chunks) == text
        assert all(text[chunk["start"]:chunk["end"]] == chunk["text"] for chunk in chunks)
        assert {chunk.get("language") for chunk in chunks} == {LANGUAGES[name]}


def test_filter_files_of_several_languages(tmp_path):
    """Each file is parsed as its extension (or shebang) says, with --jobs 1 and 2."""
    paths = written(tmp_path)
    records = records_with_jobs("--strategy", "code", "--chars", "40", *paths)
    check_records(records, tmp_path)
    inner = [record for record in records if record["text"].startswith("        return os")]
    assert inner and inner[0]["symbols"] == ["class App", "def run"]


def _without(*modules: str) -> dict:
    return with_faults({"missing_modules": list(modules)})


def test_missing_grammar_is_one_line_and_the_others_are_chunked(tmp_path):
    """A file whose grammar is not installed: one line naming the language and the
    package, exit 1, the other files chunked."""
    paths = written(tmp_path)
    for jobs in ("1", "2"):
        result = subprocess.run([chunkd_command(), "--strategy", "code", "--jobs", jobs, *paths],
                                capture_output=True, env=_without("tree_sitter_go"), timeout=HANG)
        assert result.returncode == 1
        assert result.stderr.decode().splitlines() == [
            f"chunkd: {tmp_path / 'main.go'}: go needs its tree-sitter grammar: "
            "pip install 'tree-sitter>=0.25' 'tree-sitter-go'"]
        docs = {os.path.basename(record["doc"]) for record in ndjson(result.stdout)}
        assert docs == set(FILES) - {"main.go"}


def test_missing_grammar_of_the_language_option_is_a_usage_error(tmp_path):
    result = subprocess.run([chunkd_command(), "--strategy", "code", "--language", "rust", "-"],
                            input=b"fn main() {}\n", capture_output=True,
                            env=_without("tree_sitter_rust"), timeout=HANG)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        "chunkd: error: rust needs its tree-sitter grammar: "
        "pip install 'tree-sitter>=0.25' 'tree-sitter-rust'"]


@pytest.mark.parametrize(("options", "message"), [
    (["--language", "markdown"], "the code strategy has no grammar for markdown"),
    (["--separators", '["\\n"]'], "the code strategy takes no --separators"),
    (["--no-strip"], "the code strategy takes no --no-strip"),
])
def test_refused_options(options, message):
    result = run_chunkd("--strategy", "code", *options, input=b"x = 1\n")
    assert result.returncode == 2
    assert result.stderr.decode().startswith(f"chunkd: error: {message}")
    assert len(result.stderr.splitlines()) == 1


def test_bad_input_as_other_strategies(tmp_path):
    """Invalid UTF-8 in a source file: the same one line as the recursive strategy's,
    exit 1, the next file chunked."""
    (tmp_path / "bad.py").write_bytes(b"x = '\xff'\n")
    (tmp_path / "good.py").write_bytes(b"y = 2\n")
    files = [str(tmp_path / "bad.py"), str(tmp_path / "good.py")]
    code = run_chunkd("--strategy", "code", *files)
    recursive = run_chunkd(*files)
    assert code.returncode == recursive.returncode == 1
    assert code.stderr == recursive.stderr and len(code.stderr.splitlines()) == 1
    assert [record["text"] for record in ndjson(code.stdout)] == ["y = 2\n"]


def test_preview_takes_the_language_from_the_file_name(tmp_path):
    path = tmp_path / "app.py"
    path.write_text(FILES["app.py"], encoding="utf-8")
    page = run_chunkd("preview", "--strategy", "code", "--chars", "40", str(path), "-o", "-")
    assert page.returncode == 0, page.stderr
    assert b'\\"language\\":\\"python\\"' in page.stdout or b'"language":"python"' in page.stdout


def test_arrow_names_give_the_language():
    pa = pytest.importorskip("pyarrow")
    from chunkd.arrow import chunk_table

    table = pa.table({"id": ["a.py", "b.go"],
                      "text": [FILES["app.py"], FILES["main.go"]]})
    chunks = chunk_table(table, strategy="code", chunk_size=40).to_pylist()
    assert {(row["doc"], row["language"]) for row in chunks} == {("a.py", "python"),
                                                               ("b.go", "go")}
    assert any(row["symbols"] == ["class App", "def run"] for row in chunks)


@pytest.mark.slow
def test_watch_a_folder_of_mixed_files(inbox, watch):
    """``chunkd watch --strategy code``: by default it takes its languages' files too
    (and text files), each parsed as its extension says; the results are the filter's."""
    watcher = watch(inbox, "--strategy", "code", "--chars", "40", "-v")
    watcher.started()
    written(inbox)
    taken = set(FILES) - {"tool"}   # no extension: not taken unless --include says so
    watcher.wait_for(lambda: set(results(inbox)) == taken, what="every result")
    for name, result in results(inbox).items():
        assert result["chunks"] == filter_chunks(inbox / name, "--strategy", "code",
                                                 "--chars", "40")
        assert {chunk.get("language") for chunk in result["chunks"]} == {LANGUAGES[name]}


@pytest.mark.slow
def test_serve_takes_the_language_from_the_document_name():
    """``chunkd serve --strategy code``: a request's ``doc`` names the language."""
    with Serve("--strategy", "code") as server:
        for doc, language in (("main.go", "go"), ("notes.txt", None)):
            status, _, data = request(server, "POST", f"/api/split?strategy=code&doc={doc}&chars=30",
                                      FILES["main.go"].encode(),
                                      host=f"127.0.0.1:{server.port}")
            assert status == 200, data
            records = ndjson(orjson.loads(data)["jsonl"].encode())
            assert {record.get("language") for record in records} == {language}


def test_eval_with_the_code_strategy(tmp_path):
    """``chunkd eval --strategy code``: each question's function (which fits the size)
    lies whole in a chunk that is retrieved, so recall is 1."""
    source = "import os\n\n\n" + "".join(
        f"def helper_{k}(value):\n    '''Helper {k} scales.'''\n    return value * {k}\n\n\n"
        for k in range(12))
    (tmp_path / "app.py").write_text(source, encoding="utf-8")
    with open(tmp_path / "q.jsonl", "w", encoding="utf-8") as questions:
        for k in (3, 7):
            function = f"def helper_{k}(value):\n    '''Helper {k} scales.'''\n    return value * {k}"
            questions.write(json.dumps({"question": f"What does helper {k} scale?", "doc": "app.py",
                                        "references": [{"text": function}]}) + "\n")
    result = run_chunkd("eval", "app.py", "--questions", "q.jsonl", "--strategy", "code",
                        "--chars", "200", "--overlap", "0", "--format", "ndjson", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [record] = ndjson(result.stdout)
    assert record["strategy"] == "code" and record["recall"] == 1.0


#: Source nested far deeper than Python's recursion limit: each once crashed the run.
DEEP = {
    "parens.py": "x = " + "(" * 1000 + "1" + ")" * 1000 + "\n",
    "arrays.js": "var a = " + "[" * 20000 + "]" * 20000 + ";\n",
    "ifs.py": "".join(" " * depth + f"if x{depth}:\n" for depth in range(3000))
              + " " * 3000 + "pass\n",
}


def deep_files(folder) -> list[str]:
    """The deep files between two plain ones, as paths."""
    return written(folder, {"first.py": "a = 1\n", **DEEP, "last.py": "b = 2\n"})


def test_deep_nesting_is_chunked_by_the_filter(tmp_path):
    """Each deep file is chunked like any other (within the size, tiling it), with
    --jobs 1 and 2, and the files around it too."""
    paths = deep_files(tmp_path)
    records = records_with_jobs("--strategy", "code", "--chars", "1000", *paths)
    for path in paths:
        text = open(path, encoding="utf-8").read()
        chunks = [record for record in records if record["doc"] == path]
        assert "".join(chunk["text"] for chunk in chunks) == text
        assert all(chunk["length"] <= 1000 for chunk in chunks)


def test_deep_nesting_in_parquet_keeps_every_row(tmp_path):
    """Parquet input with --strategy auto: the deep rows and the rows before and after
    them are all chunked."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    names = ["first.py", *DEEP, "last.py"]
    texts = ["a = 1\n", *DEEP.values(), "b = 2\n"]
    pq.write_table(pa.table({"id": names, "text": texts}), tmp_path / "in.parquet")
    result = run_chunkd("--input", "parquet", str(tmp_path / "in.parquet"),
                        "--strategy", "auto")
    assert result.returncode == 0, result.stderr[-2000:]
    by_doc: dict[str, str] = {}
    for record in ndjson(result.stdout):
        by_doc[record["doc"]] = by_doc.get(record["doc"], "") + record["text"]
    assert by_doc == dict(zip(names, texts))


@pytest.mark.slow
def test_deep_nesting_in_the_daemon_and_serve(inbox, watch):
    """``chunkd watch --strategy code`` writes one result for each deep file (the
    filter's chunks) and no error; ``chunkd serve`` answers 200."""
    watcher = watch(inbox, "--strategy", "code", "--chars", "1000", "-v")
    watcher.started()
    deep_files(inbox)
    watcher.wait_for(lambda: set(results(inbox)) == {"first.py", *DEEP, "last.py"},
                     what="every result")
    assert not list(inbox.rglob("*.error.json"))
    for name in DEEP:
        assert results(inbox)[name]["chunks"] == filter_chunks(
            inbox / name, "--strategy", "code", "--chars", "1000")
    with Serve("--strategy", "code") as server:
        for name, text in DEEP.items():
            status, _, data = request(server, "POST",
                                      f"/api/split?strategy=code&doc={name}&chars=1000",
                                      text.encode(), host=f"127.0.0.1:{server.port}")
            assert status == 200, data
            records = ndjson(orjson.loads(data)["jsonl"].encode())
            assert "".join(record["text"] for record in records) == text


@pytest.mark.slow
def test_memory_of_a_generated_data_table(tmp_path):
    """A 3.5 MB JavaScript table of small numbers (one array of 600,000 of them): the
    installed chunkd's peak RSS stays within what docs/code.md says, 80 bytes a byte of
    source (a piece for each element at once took 156)."""
    from memory import peak_of

    rng = random.Random(5)
    path = tmp_path / "table.js"
    path.write_text("var data = [" + ",".join(str(rng.randrange(100000))
                                              for _ in range(600000)) + "];\n")
    size = path.stat().st_size
    peak_mb = peak_of(["--strategy", "code", "--chars", "1000", str(path)])
    assert peak_mb * 2**20 < 80 * size, peak_mb


def test_a_source_file_over_the_limit_is_one_line_and_the_others_are_chunked(tmp_path):
    paths = written(tmp_path, {"big.py": "x = 1\n" * 100, "small.py": "y = 2\n"})
    for jobs in ("1", "2"):
        result = run_chunkd("--strategy", "code", "--max-source-bytes", "500",
                            "--jobs", jobs, *paths)
        assert result.returncode == 1
        assert result.stderr.decode().splitlines() == [
            f"chunkd: {paths[0]}: over --max-source-bytes 500: the code strategy holds a "
            "source file whole with its syntax tree; raise the limit, or cut it with "
            "--strategy recursive --language NAME"]
        assert [record["text"] for record in ndjson(result.stdout)] == ["y = 2\n"]
