"""``chunkd eval --strategy recursive,llm``: the llm strategy's setting in the grid,
its chunks the filter's, what its boundaries cost said beside the scores."""

from __future__ import annotations

from chat_server import serving
from command import ndjson, run_chunkd
from test_eval_command import DOCS, QUESTIONS
from test_llm_strategy import topics


def test_eval_grids_the_llm_strategy():
    with serving(topics) as model:
        llm = ("--llm-url", model.url, "--llm-model", "toy-llm")
        done = run_chunkd("eval", *DOCS, "--questions", QUESTIONS, "--strategy",
                          "recursive,llm", "--tokens", "256", "--overlap", "0",
                          "--format", "ndjson", *llm)
        assert done.returncode == 0, done.stderr
        found = {record["strategy"]: record for record in ndjson(done.stdout)}
        assert set(found) == {"recursive", "llm"}
        asked = len(model.requests)
        chunked = run_chunkd("--strategy", "llm", "--tokens", "256", *llm, *DOCS)
        assert chunked.returncode == 0, chunked.stderr
        assert found["llm"]["chunks"] == len(ndjson(chunked.stdout))
        assert len(model.requests) == 2 * asked  # the same windows, asked again
        [line] = done.stderr.decode().splitlines()
        assert line.startswith(f"chunkd eval: --strategy llm: {asked} LLM calls to ")
