"""Voice replies: the answer's text, spoken through an OpenAI-compatible /audio/speech."""
