"""The TLS trust every outgoing HTTPS client of the process uses.

The system's CA store (SSL_CERT_FILE/SSL_CERT_DIR honoured), so a provider, search engine
or page behind a locally trusted CA verifies; certifi's bundle when the system has none.
One context per process: loading a CA store is most of an httpx client's set-up cost, and
httpx loads one for every client it is not handed a context for."""

from __future__ import annotations

import functools
import ssl


@functools.cache
def tls_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if not ctx.cert_store_stats()["x509_ca"]:
        import certifi

        ctx.load_verify_locations(certifi.where())
    return ctx
