"""MCP servers as extension tools: config, connections, and their tools as `server__tool`."""
