"""The core: one chat turn (retrieve, threshold, prompt, fall back), answers, the LLM client and limits."""
