"""web_fetch: the readable text of a few URLs, with every hop checked against the network policy."""
