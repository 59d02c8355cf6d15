"""One LLM endpoint (``--llm-url``), and what chunkd asks it: each chunk's context."""
