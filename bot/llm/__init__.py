"""The model client: any OpenAI-compatible endpoint, over httpx (no openai SDK)."""
