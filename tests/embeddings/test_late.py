"""Late chunking (``--late``, ``chunkd.embeddings.late``) with the real all-MiniLM-L6-v2,
against references written from the contract on sentence-transformers' own token
vectors (``encode(..., output_value="token_embeddings")``, one pass a text): a chunk
that is a whole short document is the model's own embedding of it; spans anywhere
(Chinese, emoji, accents, runs of white space) are the mean of the tokens they overlap;
a window as long as the document is the one pass; windows on a long document give each
token the vector of the window it is most central in; the refusals are one line, exit
2, before the model loads; and the installed ``chunkd`` writes these vectors."""

from __future__ import annotations

import json
import random

import numpy
import pytest

from command import ndjson, run_chunkd
from embedding import model_folder
from tokenizer_files import minilm_folder

from chunkd.embeddings.late import late_model, late_vectors
from chunkd.settings import Settings, SettingsError

SHORT_TEXTS = [
    "The cat sat on the mat.",
    "Berlin is the capital of Germany. It has 3.8 million people.",
    "北京是中国的首都。🙂 emoji 🎉 text, café au lait.",
    " \u200b\n",  # no token at all: the special tokens, the model's embedding of it
]


@pytest.fixture(scope="module")
def model(minilm):
    """sentence-transformers' own model of the folder, as chunkd loaded it (once a test
    process): its ``encode`` is the oracle."""
    return minilm[1].inner.model


@pytest.fixture(scope="module")
def parts(model):
    return late_model(model, "all-MiniLM-L6-v2")


def unit(vector):
    return vector / numpy.linalg.norm(vector)


def token_vectors(model, text: str):
    """The model's output vector of each token of ``text`` (special tokens included) in
    one pass, and each token's character span."""
    vectors = model.encode([text], output_value="token_embeddings")[0].numpy()
    spans = [tuple(span) for span in model.tokenizer(text, return_offsets_mapping=True)
             ["offset_mapping"]]
    assert len(vectors) == len(spans), "the reference's text must fit one window"
    return vectors, spans


def reference(vectors, spans, start: int, end: int):
    """A span's late vector from the contract: the mean of the vectors of the tokens
    (with a width) that overlap it, [CLS] with the first and [SEP] with the last; no
    token: the nearest before and after it."""
    inner = [index for index in range(1, len(spans) - 1) if spans[index][1] > spans[index][0]]
    chosen = [index for index in inner if spans[index][0] < end and spans[index][1] > start]
    if chosen:
        chosen += [0] if chosen[0] == inner[0] else []
        chosen += [len(spans) - 1] if chosen[-1] == inner[-1] else []
    else:
        chosen = [index for index in inner if spans[index][1] <= start][-1:] + \
                 [index for index in inner if spans[index][0] >= end][:1]
    return unit(vectors[chosen].mean(axis=0))


def test_one_chunk_of_a_short_document_is_the_models_own_embedding(model, parts):
    for text in SHORT_TEXTS:
        late = late_vectors(parts, text, [(0, len(text))])[0]
        own = model.encode([text])[0]
        assert float(late @ own) >= 0.999, text


def test_random_spans_are_the_mean_of_the_tokens_they_overlap(model, parts):
    pieces = ["word", "chunk", "ing", " ", "  ", "\n\n", ".", ",", "北京", "的", "🙂", "🎉",
              "café", "naïve", "3.8", "Zürich", "\u200b", "e\u0301"]
    randomly = random.Random(49)
    for _ in range(4):
        text = "".join(randomly.choice(pieces) for _ in range(randomly.randrange(5, 60)))
        vectors, spans = token_vectors(model, text)
        chunks = []
        for _ in range(12):
            start = randomly.randrange(len(text))
            chunks.append((start, randomly.randrange(start + 1, len(text) + 1)))
        late = late_vectors(parts, text, chunks)
        for (start, end), vector in zip(chunks, late):
            expected = reference(vectors, spans, start, end)
            assert numpy.allclose(vector, expected, atol=2e-5), (text, start, end)


def test_offsets_are_code_points_in_chinese_and_emoji_text(model, parts):
    """Each character that is a token of its own (a CJK character, an emoji the
    tokenizer knows not, so [UNK]), as a chunk of its own code point, gets that token's
    vector, after astral characters that are two UTF-16 units and four UTF-8 bytes."""
    text = "🙂🎉 北京是中国的首都 😀 上海 𠀋 end"
    vectors, spans = token_vectors(model, text)
    singles = [(index, text.index(character)) for character in "北京是中国的首都上海"
               for index in [spans.index((text.index(character), text.index(character) + 1))]]
    emoji = [(spans.index((text.index(character), text.index(character) + 1)),
              text.index(character)) for character in "😀𠀋"]
    chunks = [(start, start + 1) for _, start in singles + emoji]
    late = late_vectors(parts, text, chunks)
    for (index, _), vector in zip(singles + emoji, late):
        assert numpy.allclose(vector, unit(vectors[index]), atol=2e-5)


def test_a_window_as_long_as_the_document_is_the_one_pass(model, parts):
    text = " ".join(SHORT_TEXTS) * 3
    vectors, spans = token_vectors(model, text)
    count = len(spans) - 2
    chunks = [(start, start + 40) for start in range(0, len(text) - 40, 35)]
    expected = numpy.stack([reference(vectors, spans, *chunk) for chunk in chunks])
    assert numpy.allclose(late_vectors(parts, text, chunks, window=count), expected, atol=2e-5)
    shorter = late_vectors(parts, text, chunks, window=count - 1)  # two windows: not it
    assert not numpy.allclose(shorter, expected, atol=1e-3)


#: Words of one all-MiniLM-L6-v2 token each, so that a window's tokens, as text, are
#: tokenised again to the same tokens (checked).
WORDS = ("river bank money loan city house water paper music table green small early "
         "light night stone garden market winter summer").split()


def test_windows_on_a_long_document_take_each_token_where_it_is_most_central(model, parts):
    randomly = random.Random(7)
    text = " ".join(randomly.choice(WORDS) for _ in range(100))
    tokens = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = tokens["input_ids"], tokens["offset_mapping"]
    assert len(ids) == 100
    window = 24
    starts = list(range(0, len(ids) - window, window // 2)) + [len(ids) - window]
    assert len(starts) > 4
    outputs = []  # each window's vectors, [CLS] and [SEP] included, from its own text
    for start in starts:
        piece = text[offsets[start][0]:offsets[start + window - 1][1]]
        vectors, spans = token_vectors(model, piece)
        assert model.tokenizer(piece, add_special_tokens=False)["input_ids"] == \
            ids[start:start + window]
        outputs.append(vectors)

    def vector(token: int):
        inside = [number for number, start in enumerate(starts)
                  if start <= token < start + window]
        best = min(inside, key=lambda number: abs(token + 0.5 - starts[number] - window / 2))
        return outputs[best][1 + token - starts[best]]

    chunks = [(start, start + 60) for start in range(0, len(text) - 60, 50)] + [(0, len(text))]
    late = late_vectors(parts, text, chunks, window=window)
    for (start, end), made in zip(chunks, late):
        inside = [token for token, (left, right) in enumerate(offsets)
                  if left < end and right > start]
        rows = [vector(token) for token in inside]
        rows += [outputs[0][0]] if inside[0] == 0 else []
        rows += [outputs[-1][-1]] if inside[-1] == len(ids) - 1 else []
        assert numpy.allclose(made, unit(numpy.mean(rows, axis=0)), atol=2e-5), (start, end)


def _folder_with(tmp_path, files: dict[str, str]):
    """The real model's folder (its files linked) with ``files`` written over."""
    folder = tmp_path / "model"
    folder.mkdir()
    for entry in minilm_folder().iterdir():
        if entry.name not in {name.split("/")[0] for name in files}:
            (folder / entry.name).symlink_to(entry)
    for name, text in files.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_what_cannot_give_late_vectors_is_refused_in_one_line(tmp_path):
    document = tmp_path / "a.txt"
    document.write_text("One sentence.")
    pooling = {"word_embedding_dimension": 384, "pooling_mode_cls_token": True,
               "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False}
    cls = _folder_with(tmp_path, {"1_Pooling/config.json": json.dumps(pooling)})
    static = tmp_path / "static"
    static.mkdir()
    (static / "modules.json").write_text(json.dumps([{
        "idx": 0, "name": "0", "path": "0_StaticEmbedding",
        "type": "sentence_transformers.models.StaticEmbedding"}]))
    vectors = ("--vectors", "--embed", model_folder())
    cases = [
        ((), "--late needs --vectors and --embed MODEL"),
        (("--vectors", "--embed-url", "http://127.0.0.1:9/v1", "--embed-model", "m"),
         "--late needs --embed MODEL, a local model: --embed-url returns one vector a text"),
        (("--strategy", "markdown", "--embed-text", *vectors),
         "--late embeds each chunk within its document's text, which --embed-text's"),
        (("--embed-prefix", "passage: ", *vectors),
         "--late embeds each chunk within its document's text, which --embed-prefix's"),
        (("--context", "--llm-url", "http://127.0.0.1:9", "--llm-model", "m", *vectors),
         "--late embeds each chunk within its document's text, which --context's context"),
        (("--vectors", "--embed", str(cls)), "pools its tokens by cls, not mean"),
        (("--vectors", "--embed", str(static)), "is a static model (StaticEmbedding)"),
    ]
    for arguments, message in cases:
        made = run_chunkd("--late", *arguments, str(document))
        assert made.returncode == 2, arguments
        assert made.stdout == b""
        lines = made.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("chunkd: error: ")
        assert message in lines[0], lines[0]
    made = run_chunkd("sync", "--late", *vectors, str(tmp_path), "--sink", "lancedb://x")
    assert made.returncode == 2
    assert made.stderr.decode().splitlines() == [
        "chunkd sync: error: --late is for the chunkd filter and chunkd eval: this command "
        "would give plain vectors"]
    with pytest.raises(SettingsError, match="^late is for the chunkd filter and chunkd eval"):
        Settings(late=True, vectors=True, embed=model_folder())  # the Python API's vectors


@pytest.mark.slow  # the command loads the model (seconds)
def test_the_chunkd_command_writes_each_documents_late_vectors(model, parts, tmp_path):
    """Two documents, one longer than the model's window (windows), one Chinese with
    emoji whose chunks are each longer than a window: each chunk's vector is its late
    vector within its own document, not the chunk's embedding alone."""
    long = " ".join(" ".join(SHORT_TEXTS) for _ in range(13))
    texts = [long, "北京是中国的首都。🙂 上海是一座城市。🎉 广州也是。" * 20]
    files = []
    for number, text in enumerate(texts):
        files.append(tmp_path / f"{number}.txt")
        files[-1].write_text(text, encoding="utf-8")
    assert len(model.tokenizer(long)["input_ids"]) > 2 * model.max_seq_length
    # In code points, and chunks longer than a window: --late reads them in windows.
    made = run_chunkd("--chars", "400", "--vectors", "--embed", model_folder(), "--late",
                      "-q", *map(str, files))
    assert made.returncode == 0, made.stderr
    assert made.stderr == b""
    records = ndjson(made.stdout)
    assert any(len(model.tokenizer(record["text"])["input_ids"]) > model.max_seq_length
               for record in records)
    assert {record["doc"] for record in records} == set(map(str, files))
    for path, text in zip(files, texts):
        mine = [record for record in records if record["doc"] == str(path)]
        assert len(mine) >= 2
        written = numpy.array([record["vector"] for record in mine], dtype=numpy.float32)
        expected = late_vectors(parts, text, [(record["start"], record["end"])
                                              for record in mine])
        assert numpy.allclose(written, expected, atol=1e-5)
        alone = model.encode([record["text"] for record in mine])
        assert (numpy.sum(written * alone, axis=1) < 0.99).any()  # context made a difference
