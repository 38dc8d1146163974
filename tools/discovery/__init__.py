"""Tool discovery: which tools the model sees on each call, under a token budget."""
