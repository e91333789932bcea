"""A func.FunctionApp that only registers a df.Blueprint from a sibling module (keys required for 'hello')."""

from __future__ import annotations

import azure.functions as func
from greetings import bp

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(bp)


@app.route(route="admin-only", auth_level=func.AuthLevel.ADMIN)
def admin_only(req: func.HttpRequest) -> str:
    return "admin ok"


@app.route(route="open", auth_level=func.AuthLevel.ANONYMOUS)
def open_route(req: func.HttpRequest) -> str:
    return "open ok"
