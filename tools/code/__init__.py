"""The code tool: run model-written JavaScript/TypeScript in a sandboxed `bun run -`."""
