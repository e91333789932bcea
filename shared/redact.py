"""Scrubs credentials out of free text before it leaves an activity (results, custom status, manifest, HTTP).

Error messages from libraries are not ours to shape: urllib3 and azure-core quote the request URL, query string
included, and a blob URL built from a SAS connection string carries its signature there. Pure and deterministic,
so the orchestrator may call it too.
"""

from __future__ import annotations

import re

# A URL's query string (SAS tokens, codes) and anything that looks like a credential assignment or bearer token.
_URL_QUERY = re.compile(r"(?P<url>\b[a-z][a-z0-9+.-]*://[^\s?#'\"<>]+)\?[^\s#'\"<>]*", re.IGNORECASE)
_ASSIGNMENT = re.compile(
    r"(?P<key>\b(?:sig|signature|accountkey|sharedaccesskey|client_secret|password|access_token|refresh_token|"
    r"client_assertion)\s*[=:]\s*)[^\s;&,'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\bbearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
MARK = "<redacted>"


def redact(text: str) -> str:
    """``text`` with URL query strings, ``key=secret`` pairs and bearer tokens replaced by ``<redacted>``."""
    text = _URL_QUERY.sub(lambda m: f"{m.group('url')}?{MARK}", text)
    text = _ASSIGNMENT.sub(lambda m: f"{m.group('key')}{MARK}", text)
    return _BEARER.sub(lambda m: f"{m.group('key')}{MARK}", text)
