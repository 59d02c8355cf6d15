"""``--context`` through the installed ``chunkd``, against a loopback chat endpoint
(``chat_server``) that records what it is asked: each chunk's context from its whole
document, the requests' shared beginnings, the warm-up request, the bound in flight, the
cache, failures never silent, the key never shown; and the client's promises in
process (timeouts, a server that drips, usage read)."""

from __future__ import annotations

import threading

import orjson
import pytest
from chat_server import chunk_in, context_of, serving
from command import ndjson, run_chunkd

from chunkd.llm.client import ChatClient, chat_url
from chunkd.model.errors import LLMError

KEY = "sk-llm-Very-Secret-4c1d"
ALPHA = ("# Alpha handbook\n\n" + "".join(
    f"Section {number} of the alpha handbook says what step {number} does and why. "
    f"It names the tool of step {number} and its one risk.\n\n" for number in range(6)))
BETA = ("# Beta notes\n\n" + "".join(
    f"Beta note {number}: the reading of gauge {number} is taken at noon, then logged.\n\n"
    for number in range(5)))


@pytest.fixture
def server():
    with serving() as made:
        yield made


@pytest.fixture
def documents(tmp_path):
    (tmp_path / "alpha.md").write_text(ALPHA)
    (tmp_path / "beta.md").write_text(BETA)
    return [str(tmp_path / "alpha.md"), str(tmp_path / "beta.md")]


def chunkd_context(server, *args: str, input: bytes = b""):
    return run_chunkd("--chars", "150", "--ids", "--context", "--llm-url", server.url,
                      "--llm-model", "toy-llm", *args, input=input)


def test_each_chunk_gets_its_context_asked_cheaply(server, documents, monkeypatch):
    monkeypatch.setenv("CHUNKD_LLM_API_KEY", KEY)
    server.gather = 2
    done = chunkd_context(server, "--llm-concurrency", "2", *documents)
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    plain = run_chunkd("--chars", "150", "--ids", *documents)
    # The records without --context, field for field, plus each chunk's own context.
    assert [{key: value for key, value in record.items() if key != "context"}
            for record in records] == ndjson(plain.stdout)
    assert [record["context"] for record in records] == [
        context_of(record["text"]) for record in records]
    assert len(server.requests) == len(records)
    texts = {documents[0]: ALPHA, documents[1]: BETA}
    for name, text in texts.items():
        mine = [entry for entry in server.requests
                if chunk_in(entry[3]["messages"][0]["content"]) in
                {record["text"] for record in records if record["doc"] == name}]
        prompts = [entry[3]["messages"][0]["content"] for entry in mine]
        # Every request of a document begins with the same text: the whole document.
        heads = {prompt[:prompt.index("<chunk>")] for prompt in prompts}
        assert len(heads) == 1 and f"<document>\n{text}\n</document>" in heads.pop()
        assert len({entry[3]["prompt_cache_key"] for entry in mine}) == 1
        assert all(entry[3]["cache_prompt"] is True for entry in mine)
        # The first is answered before any other of the document is sent.
        first, *rest = sorted(mine, key=lambda entry: entry[0])
        assert all(first[1] <= other[0] for other in rest)
    assert len({body["prompt_cache_key"] for body in server.bodies()}) == 2
    assert server.peak == 2  # the most ever in flight: the bound, reached
    assert {entry[2]["Authorization"] for entry in server.requests} == {f"Bearer {KEY}"}
    assert KEY not in done.stderr.decode() + done.stdout.decode()
    [line] = done.stderr.decode().splitlines()
    prompt_tokens = sum(len(body["messages"][0]["content"].encode()) // 4
                        for body in server.bodies())
    assert line.startswith(f"chunkd: --context: {len(records)} LLM calls to "
                           f"{server.url}/v1/chat/completions, {prompt_tokens:,} prompt "
                           "tokens (")
    assert " cached), " in line and "completion tokens" in line


def test_a_failed_chunk_fails_its_document_only(server, documents):
    server.failing = "step 3"
    done = chunkd_context(server, *documents)
    assert done.returncode == 1
    records = ndjson(done.stdout)
    assert {record["doc"] for record in records} == {documents[1]}
    assert all(record["context"] for record in records)
    [line, cost] = done.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: {documents[0]}: 1 of ")
    assert "chunks got no context: " in line and "HTTP 500" in line
    assert "--context-on-error keep" in line
    assert cost.startswith("chunkd: --context: ")


def test_keep_writes_null_and_says_how_many(server, documents):
    server.failing = "step 3"
    done = chunkd_context(server, "--context-on-error", "keep", documents[0])
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    missing = [record for record in records if record["context"] is None]
    assert [record["text"] for record in missing] == [
        record["text"] for record in records if "step 3" in record["text"]]
    assert len(missing) == 1 and all(record["context"] for record in records
                                     if record not in missing)
    assert b'"context":null' in done.stdout
    [line, _] = done.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: {documents[0]}: 1 of {len(records)} chunks written "
                           'with "context": null (--context-on-error keep): ')


def test_an_empty_answer_is_no_context(server, documents):
    server.faults = ["empty"]
    done = chunkd_context(server, documents[1])
    assert done.returncode == 1
    assert b"an empty completion" in done.stderr
    assert done.stdout == b""


def test_429_and_500_are_tried_again(server, documents):
    server.faults = ["429", "500"]
    done = chunkd_context(server, "--llm-concurrency", "1", documents[1])
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    assert len(server.requests) == len(records) + 2
    assert all(record["context"] == context_of(record["text"]) for record in records)


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere(server, documents, monkeypatch):
    with serving() as elsewhere:
        monkeypatch.setenv("CHUNKD_LLM_API_KEY", KEY)
        server.location = elsewhere.url + "/v1/chat/completions"
        server.faults = ["redirect"]
        done = chunkd_context(server, documents[1])
        assert done.returncode == 1
        assert elsewhere.requests == []
        message = done.stderr.decode()
        assert f"HTTP 307 Temporary Redirect to {elsewhere.url}: chunkd follows no " \
               "redirect (give --llm-url the URL that answers)" in message
        assert KEY not in message and done.stdout == b""


def test_credentials_in_the_url_go_as_basic_and_are_shown_nowhere(server, documents,
                                                                 monkeypatch):
    monkeypatch.delenv("CHUNKD_LLM_API_KEY", raising=False)
    url = server.url.replace("http://", "http://someone:pass-word-9@") + "/v1?api-key=qsecret9"
    done = run_chunkd("--chars", "150", "--context", "--llm-url", url, "--llm-model", "m",
                      "--format", "json", documents[1])
    assert done.returncode == 0, done.stderr
    assert {entry[2]["Authorization"] for entry in server.requests} == {
        "Basic c29tZW9uZTpwYXNzLXdvcmQtOQ=="}  # someone:pass-word-9
    shown = done.stdout + done.stderr
    assert b"pass-word-9" not in shown and b"qsecret9" not in shown
    assert f"LLM calls to {server.url}/v1/chat/completions, ".encode() in done.stderr


def test_a_rerun_with_the_cache_sends_nothing(server, documents, tmp_path):
    cache = str(tmp_path / "contexts")
    first = chunkd_context(server, "--llm-cache", cache, *documents)
    assert first.returncode == 0, first.stderr
    asked = len(server.requests)
    assert asked == len(ndjson(first.stdout))
    again = chunkd_context(server, "--llm-cache", cache, *documents)
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == asked  # nothing sent
    assert again.stdout == first.stdout
    assert again.stderr.decode().startswith(
        f"chunkd: --context: 0 LLM calls to {server.url}/v1/chat/completions, 0 prompt "
        f"tokens (0 cached), 0 completion tokens, ")
    assert again.stderr.decode().rstrip().endswith(f"; {asked:,} from --llm-cache")


def test_a_cache_folder_others_may_write_is_refused_before_any_request(server, documents,
                                                                     tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    done = chunkd_context(server, "--llm-cache", str(folder), *documents)
    assert done.returncode == 2 and server.requests == []
    assert done.stderr.decode() == (f"chunkd: error: --llm-cache {folder}: writable by others "
                                    "than its owner (mode 777), not trusted: remove it, or "
                                    "give a folder of this user's own\n")


def test_embed_text_begins_with_the_context(server, documents):
    done = chunkd_context(server, "--strategy", "markdown", "--embed-text", documents[1])
    assert done.returncode == 0, done.stderr
    for record in ndjson(done.stdout):
        assert record["embed_text"] == record["context"] + "\n\nBeta notes\n\n" + record["text"]


def test_the_prompt_file(server, documents, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read:\n{document}\nThen situate\n<chunk>\n{chunk}\n</chunk>\nBriefly.")
    done = chunkd_context(server, "--context-prompt", str(prompt), documents[1])
    assert done.returncode == 0, done.stderr
    first = server.bodies()[0]["messages"][0]["content"]
    assert first.startswith(f"Read:\n{BETA}\nThen situate\n<chunk>\n")
    assert first.endswith("\n</chunk>\nBriefly.")
    prompt.write_text("{chunk} before {document}")
    refused = chunkd_context(server, "--context-prompt", str(prompt), documents[1])
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith("chunkd: error: --context-prompt: the prompt "
                                              "must hold {document} once, then {chunk} once")


@pytest.mark.parametrize("args, message", [
    (["--context"], "--context needs an LLM: --llm-url URL --llm-model NAME (an "
                    "OpenAI-compatible chat endpoint and the model it serves)"),
    (["--llm-model", "m"], "--llm-model is for --context or --strategy llm or --strategy "
                           "propositions"),
    (["--context", "--llm-url", "ftp://h", "--llm-model", "m"],
     "--llm-url ftp://h: not an http:// or https:// URL"),
])
def test_settings_errors(args, message, documents):
    done = run_chunkd(*args, documents[1])
    assert done.returncode == 2
    assert done.stderr.decode() == f"chunkd: error: {message}\n"


def test_no_other_front_end_takes_context_yet(tmp_path):
    done = run_chunkd("preview", "--context", "--llm-url", "http://h", "--llm-model", "m",
                      "-o", str(tmp_path / "p.html"), "-")
    assert done.returncode == 2
    assert b"--context is written by the filter (chunkd FILES) so far" in done.stderr


def test_without_context_no_record_changes(documents):
    """The fields and their order without --context, as records had them before it
    (the context field comes before vector and text, and only when asked)."""
    done = run_chunkd("--chars", "150", "--ids", "--format", "json", documents[1])
    [document] = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert list(document["chunks"][0]) == ["index", "start", "end", "length", "chunk_id",
                                           "text"]


def long_document(tmp_path):
    text = "# Guide\n\n" + "".join(
        f"## Part {number}\n\n" + "".join(f"Part {number}, line {line}, says a thing about "
                                           f"topic {number}. " for line in range(40))
        + "\n\n" for number in range(12))
    path = tmp_path / "guide.md"
    path.write_text(text)
    return str(path), text


@pytest.mark.parametrize("told", ["option", "server"])
def test_a_long_document_is_its_outline_and_the_text_around_each_chunk(server, tmp_path, told):
    from chunkd.units import resolve

    path, text = long_document(tmp_path)
    window = ["--llm-window", "1024"] if told == "option" else []
    server.models = {"object": "list", "data": [{"id": "toy-llm", "max_model_len": 1024}]}
    done = run_chunkd("--chars", "400", "--context", "--llm-url", server.url, "--llm-model",
                      "toy-llm", *window, path)
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    assert [record["context"] for record in records] == [
        context_of(record["text"]) for record in records]
    assert server.gets == ([] if told == "option" else ["/v1/models"])
    count = resolve("cl100k_base").count
    prompts = {chunk_in(body["messages"][0]["content"]): body["messages"][0]["content"]
               for body in server.bodies()}
    assert len(prompts) == len(records)
    for record in records:
        prompt = prompts[record["text"]]
        assert "[The document is too long to give whole: its outline, then its text around " \
               "the chunk.]\n\nOutline:\n# Guide\n## Part 0\n## Part 1\n" in prompt
        assert "## Part 11\n\nText from code point " in prompt
        excerpt = prompt.partition(f" of {len(text):,}:\n")[2].partition("\n</document>")[0]
        assert record["text"] in excerpt and excerpt in text
        # Within the window, the answer's tokens and an eighth left; most of the rest used.
        assert 0.8 * (1024 - 200 - 1024 // 8) < count(prompt) <= 1024 - 200 - 1024 // 8
    assert count(text) > 4 * 1024


def test_a_server_that_cut_the_prompt_is_named(server, documents):
    server.reads = 20
    done = chunkd_context(server, documents[0])
    assert done.returncode == 0, done.stderr
    [line, _] = done.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: --llm-url {server.url}/v1/chat/completions: the server "
                           "counted 20 prompt tokens for a prompt of about ")
    assert line.endswith(": it cut the prompt, and contexts were written from part of it "
                         "(give --llm-window the server's window, or raise it there)")


def test_an_input_field_named_context(server):
    """Free without --context, as before it; refused with it (a record holds a key once)."""
    line = b'{"text": "One. Two.", "context": "mine"}\n'
    plain = run_chunkd("--input", "ndjson", "--chars", "5", input=line)
    assert plain.returncode == 0 and [record["context"] for record in ndjson(plain.stdout)] \
        == ["mine", "mine"]
    done = chunkd_context(server, "--input", "ndjson", input=line)
    assert done.returncode == 1 and done.stdout == b"" and server.requests == []
    assert done.stderr.decode().startswith("chunkd: 1: field 'context' is reserved for chunk "
                                           "records with --context; rename it\n")


# --- the client, in process ----------------------------------------------------------

@pytest.mark.parametrize("given, called", [
    ("http://h:1", "http://h:1/v1/chat/completions"),
    ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
    ("https://h/v1/chat/completions", "https://h/v1/chat/completions"),
    ("http://h/proxy?api-version=2", "http://h/proxy/v1/chat/completions?api-version=2"),
])
def test_the_url_rule(given, called):
    assert chat_url(given) == called


def quick(url: str, timeout: float = 5) -> ChatClient:
    return ChatClient(url, "toy-llm", timeout, first_wait=0.01)


def prompt(chunk: str) -> str:
    return f"<document>\nD\n</document>\n<chunk>\n{chunk}\n</chunk>\n"


def test_a_dripping_answer_times_out(server):
    server.faults = ["drip"] * 5
    with pytest.raises(LLMError, match=r"no answer after 5 tries \(last: timed out\)$"):
        quick(server.url, timeout=0.3).complete(prompt("a"), "k", 10, threading.Event())
    assert len(server.requests) == 5


@pytest.mark.parametrize("llama", [False, True])
def test_usage_and_cached_tokens(server, llama):
    server.llama = llama  # timings.cache_n, else usage.prompt_tokens_details.cached_tokens
    client = quick(server.url)
    first = client.complete(prompt("a"), "k", 10, threading.Event())
    second = client.complete(prompt("b"), "k", 10, threading.Event())
    assert first.text == context_of("a") and first.cached_tokens == 0
    assert second.cached_tokens == len(b"<document>\nD\n</document>\n") // 4
    assert second.prompt_tokens == len(prompt("b").encode()) // 4


def test_a_malformed_answer_fails_at_once(server):
    server.faults = ["bad json"]
    with pytest.raises(LLMError, match=r"the answer is not a chat completion \(JSONDecodeError\)$"):
        quick(server.url).complete(prompt("a"), "k", 10, threading.Event())
    assert len(server.requests) == 1


def test_openai_gets_no_llama_cpp_field():
    assert quick("https://api.openai.com/v1").openai
    assert not quick("http://127.0.0.1:8080").openai


def test_the_window_the_server_says(server):
    server.models = {"object": "list", "data": [{"id": "other", "max_model_len": 1},
                                                {"id": "toy-llm", "max_model_len": 32768}]}
    assert quick(server.url).window() == 32768
    server.models = None
    server.props = {"default_generation_settings": {"n_ctx": 4096}}
    assert quick(server.url).window() == 4096
    server.props = None
    assert quick(server.url).window() is None


@pytest.mark.parametrize("seconds", ["abc", "-1", "0", "nan", "inf", "1e308", ""])
def test_a_timeout_that_is_none_is_a_usage_error(server, documents, monkeypatch, seconds):
    """CHUNKD_LLM_TIMEOUT is read with the settings: one line and exit 2 before any
    input is read (infinity once passed, to crash at the first call)."""
    monkeypatch.setenv("CHUNKD_LLM_TIMEOUT", seconds)
    for done in (chunkd_context(server, *documents),
                 run_chunkd("--strategy", "llm", "--llm-url", server.url, "--llm-model", "m",
                            *documents)):
        assert (done.returncode, done.stdout, server.requests) == (2, b"", [])
        assert done.stderr.decode() == (
            f"chunkd: error: CHUNKD_LLM_TIMEOUT={seconds}: not a number of seconds above 0 "
            "and at most 86,400\n")
