"""The model client: the openai SDK against any OpenAI-compatible endpoint."""
