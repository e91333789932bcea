"""Query strings as the extension reads them: parameter names are case-insensitive.

``HttpRequestMessageExtensions.GetQueryNameValuePairs`` (Azure/azure-functions-durable-extension) collects the
query into ``new NameValueCollection(StringComparer.OrdinalIgnoreCase)``, so ``showhistory=true`` and
``RUNTIMESTATUS=Running`` work on Azure; aiohttp's ``request.query`` is case-sensitive.
"""

from __future__ import annotations

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

_KEY = "durable_local.query"


def query_of(request: web.Request) -> CIMultiDictProxy[str]:
    """The request's query with case-insensitive names (built once per request)."""
    cached = request.get(_KEY)
    if isinstance(cached, CIMultiDictProxy):
        return cached
    query: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict(request.query))
    request[_KEY] = query
    return query
