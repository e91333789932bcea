"""``GET /``: the Functions host's home page (``HomepageMiddleware``). A request for exactly ``/`` that no function
answers gets an HTML page saying the app is up (200), or 204 No Content with ``AzureWebJobsDisableHomepage=true``.
The Python worker's end-to-end tests rely on it to see that the host is up (``GET ''`` must be ok)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import requests

from durable_local.host import LocalHost


def test_the_root_answers_the_home_page_and_other_unknown_paths_404(host: LocalHost) -> None:
    page = requests.get(host.base_url + "/", timeout=10)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "up and running" in page.text
    # The middleware looks at the path only: any method.
    assert requests.post(host.base_url + "/", timeout=10).status_code == 200
    assert requests.get(host.base_url + "/api", timeout=10).status_code == 404
    assert requests.get(host.base_url + "/index.html", timeout=10).status_code == 404


def test_the_home_page_can_be_turned_off(host: LocalHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AzureWebJobsDisableHomepage", "True")
    response = requests.get(host.base_url + "/", timeout=10)
    assert response.status_code == 204 and response.content == b""


def test_a_function_that_answers_the_root_wins(tmp_path: Path) -> None:
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0", "extensions": {"http": {"routePrefix": ""}}}))
    (tmp_path / "function_app.py").write_text(
        textwrap.dedent(
            """
            import azure.functions as func
            app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

            @app.route(route="{*path}", methods=["GET"])
            def everything(req: func.HttpRequest) -> str:
                return "the app's own page"
            """
        )
    )
    with LocalHost(tmp_path, port=0, store="memory", drain_timeout=5) as served:
        assert requests.get(served.base_url + "/", timeout=10).text == "the app's own page"
        # Not a GET: the function does not answer, so the home page does.
        assert "up and running" in requests.post(served.base_url + "/", timeout=10).text
