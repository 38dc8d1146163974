"""The LLM tools (search, code, memory) and the one registry that lists them."""
