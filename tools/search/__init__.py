"""Web and news search through SearXNG or the Brave Search API, with fallback and a cache."""
