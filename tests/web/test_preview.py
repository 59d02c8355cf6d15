"""``chunkd preview`` as a command: a self-contained page holding the filter's records,
and clear errors. (tests/web/test_page.py opens the page in a browser.)"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess

import numpy
import pytest

from command import HANG, chunkd_command, run_chunkd
from oracle import corpus_documents

DOCUMENT = next(p for p in corpus_documents() if p.parent.name == "zh-vuedocs")


def inline(page: str, tag: str, attributes: str = "") -> list[str]:
    return re.findall(rf"<{tag}{attributes}>(.*?)</{tag}>", page, re.S)


def report(page: str) -> dict:
    """The data a page holds."""
    return json.loads(inline(page, "script", ' id="report" type="application/json"')[0])


def test_the_page_is_self_contained_and_holds_the_filters_records(tmp_path):
    result = run_chunkd("preview", str(DOCUMENT), "--tokens", "150", "--overlap", "20%",
                        "-o", str(tmp_path / "report.html"))
    assert (result.returncode, result.stderr) == (0, b"")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    no_loads(page)
    # The policy allows exactly the inline style and script, by hash.
    styles, scripts = inline(page, "style"), inline(page, "script")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)

    def digest(code: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"
    assert len(styles) == 1 and len(scripts) == 1
    assert f"style-src {digest(styles[0])};" in policy
    assert f"script-src {digest(scripts[0])};" in policy
    assert "default-src 'none'" in policy
    # The data: the filter's records for the same options, byte for byte.
    data = report(page)
    expected = run_chunkd("--count-tokens", str(DOCUMENT), "--tokens", "150", "--overlap", "20%")
    assert data["jsonl"] == expected.stdout.decode()
    assert data["text"] == DOCUMENT.read_text(encoding="utf-8")
    assert data["doc"] == str(DOCUMENT)
    assert data["settings"] == {"strategy": "recursive", "unit": "tokens", "size": 150,
                                "overlap": 30, "errors": "strict", "count_tokens": True}


def no_loads(page: str) -> None:
    """Nothing to load: no element refers to anything, no address outside the data."""
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b[^>]*\b(src|href)=", page)
    assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", page.split("<script id=")[0])
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in policy and "connect-src" not in policy


@pytest.mark.slow
def test_a_semantic_page_holds_the_distance_curve_and_loads_nothing(tmp_path):
    from embedding import model_folder

    options = ("--strategy", "semantic", "--embed", model_folder(), "--tokens", "100")
    text = DOCUMENT.read_text(encoding="utf-8")[:2000]
    (tmp_path / "doc.md").write_text(text, encoding="utf-8")
    result = run_chunkd("preview", "doc.md", *options, "-o", "report.html", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, b"")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    no_loads(page)
    assert '<figure id="curve"' in page  # where the script draws it
    data = report(page)
    records = [json.loads(line) for line in data["jsonl"].splitlines()]
    assert data["jsonl"] == run_chunkd("--count-tokens", "doc.md", *options,
                                       cwd=tmp_path).stdout.decode()
    curve = data["curve"]
    sentences = run_chunkd("--strategy", "sentences", "--size", "1", "doc.md", cwd=tmp_path)
    starts = [json.loads(line)["start"] for line in sentences.stdout.splitlines()]
    assert [at for at, _ in curve["points"]] == starts[1:] and len(starts) > 5
    assert [at for at, _ in curve["cuts"]] == [r["start"] for r in records[1:]]
    assert (curve["rule"], curve["amount"]) == ("percentile", 95)
    assert curve["threshold"] == pytest.approx(
        numpy.percentile([distance for _, distance in curve["points"]], 95), abs=1e-12)


def test_markup_in_the_document_cannot_end_the_data_element(tmp_path):
    text = "</script><script>alert(1)</script>\n<!-- <script>"
    (tmp_path / "doc.md").write_text(text)
    result = run_chunkd("preview", "doc.md", "--chars", "20", cwd=tmp_path)
    page = result.stdout.decode()
    assert result.returncode == 0
    assert page.count("</script>") == 2 and page.count("<script") == 2  # the page's own
    assert "<!--" not in page
    data = report(page)
    assert data["text"] == text


def test_stdin_to_stdout():
    text = DOCUMENT.read_bytes()
    result = run_chunkd("preview", "-", "--chars", "400", input=text)
    assert result.returncode == 0
    data = report(result.stdout.decode())
    assert data["doc"] is None
    expected = run_chunkd("--count-tokens", "--chars", "400", input=text)
    assert data["jsonl"] == expected.stdout.decode()


@pytest.mark.parametrize("args, status, message", [
    (["missing.md"], 1, "chunkd preview: missing.md: No such file or directory\n"),
    (["bad.txt"], 1, "chunkd preview: bad.txt: invalid UTF-8 at byte 3 "
                     "(use --errors replace to substitute U+FFFD)\n"),
    (["good.txt", "-o", "no/such/folder/report.html"], 1,
     "chunkd preview: no/such/folder/report.html: No such file or directory\n"),
    (["good.txt", "--chars", "50", "--overlap", "50"], 2,
     "chunkd preview: error: --overlap 50 is not smaller than the size (50 chars); "
     "write --overlap 49 or less, or a larger --chars\n"),
    ([], 2, "chunkd preview: error: the following arguments are required: FILE\n"),
])
def test_errors_are_one_line(tmp_path, args, status, message):
    (tmp_path / "bad.txt").write_bytes(b"ok \xff")
    (tmp_path / "good.txt").write_text("fine")
    result = run_chunkd("preview", *args, cwd=tmp_path)
    assert result.returncode == status
    assert result.stderr.decode().splitlines(keepends=True)[-1] == message
    assert not list(tmp_path.glob("**/*.html"))


def test_errors_replace_substitutes(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"ok \xff")
    result = run_chunkd("preview", "bad.txt", "--errors", "replace", cwd=tmp_path)
    data = report(result.stdout.decode())
    assert result.returncode == 0 and data["text"] == "ok \ufffd"


def test_stdout_that_fails_is_one_line_and_a_closed_pipe_ends_quietly(tmp_path):
    (tmp_path / "doc.md").write_text("fine text " * 100)
    command = [chunkd_command(), "preview", "doc.md"]
    with open("/dev/full", "wb") as full:
        result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, cwd=tmp_path,
                                timeout=HANG)
    assert result.returncode == 1
    assert result.stderr == b"chunkd preview: stdout: No space left on device\n"
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=tmp_path)
    reader.stdout.close()  # the reader goes away before the page is written
    assert reader.wait(timeout=HANG) == 0 and reader.stderr.read() == b""
