"""A small OpenAI-compatible chat server over a transformers model, to measure
``chunkd --context`` against a real LLM on a CPU (docs/context.md, "Measured").

    python benchmarks/context_server.py MODEL_FOLDER [GGUF_FILE] [--port 8181]
        [--no-prefix-cache] [--max-new-tokens N]

It answers ``POST /v1/chat/completions`` greedily, one request at a time, and reports
``usage`` with the model's own tokenizer. Like vLLM's prefix caching, it keeps the
attention cache of the last prompt of each ``prompt_cache_key`` and reuses it for the
longest beginning the next prompt shares with it: ``cached_tokens`` is what it did not
compute again (``--no-prefix-cache``: nothing is kept, every prompt read whole).
``GET /v1/models`` gives the model's window as ``max_model_len``.
"""

from __future__ import annotations

import argparse
import copy
import http.server
import json
import sys
import threading


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("gguf", nargs="?")
    parser.add_argument("--port", type=int, default=8181)
    parser.add_argument("--no-prefix-cache", action="store_true")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="the most tokens an answer may have, below the request's "
                             "max_tokens (a CPU writes a token at a time)")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    extra = {"gguf_file": args.gguf} if args.gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(args.folder, **extra)
    model = AutoModelForCausalLM.from_pretrained(args.folder, dtype=torch.float32, **extra)
    model.eval()
    window = int(getattr(model.config, "max_position_embeddings", 2048))
    lock = threading.Lock()
    kept: dict[str, tuple[list[int], object]] = {}

    def complete(body: dict) -> dict:
        ids = tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        ids = list(ids)
        key = body.get("prompt_cache_key", "")
        cached, cache = 0, None
        if not args.no_prefix_cache and key in kept:
            before, held = kept[key]
            while cached < min(len(before), len(ids) - 1) and before[cached] == ids[cached]:
                cached += 1
            if cached:
                cache = copy.deepcopy(held)
                cache.crop(cached - cache.get_seq_length())  # (a negative count: from the end)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), past_key_values=cache,
                                 max_new_tokens=min(int(body.get("max_tokens", 200)),
                                                    args.max_new_tokens or 1 << 20),
                                 do_sample=False, return_dict_in_generate=True,
                                 pad_token_id=tokenizer.eos_token_id)
        made = out.sequences[0, len(ids):].tolist()
        if not args.no_prefix_cache:
            kept[key] = (ids + made, out.past_key_values)
        text = tokenizer.decode(made, skip_special_tokens=True)
        return {"object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(made),
                          "prompt_tokens_details": {"cached_tokens": cached}}}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *rest: object) -> None:
            pass

        def reply(self, value: dict, status: int = 200) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                self.reply({"error": "not found"}, 404)
                return
            self.reply({"object": "list", "data": [{"id": "local", "max_model_len": window}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                answer = complete(body)
            self.reply(answer)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving on http://127.0.0.1:{args.port} (window {window})", file=sys.stderr,
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
