"""URLs in the local host's answers come from its configured base URL, never from the request's ``Host`` header, and
its JSON answers carry ``X-Content-Type-Options: nosniff``.

The Python SDK's ``create_check_status_response`` puts the origin of ``req.url`` into every management URL, and the
extension's own ``HttpApiHandler`` takes the request's authority: on Azure the front end only lets through host names
bound to the site, locally nothing does, so a forged ``Host`` would send the system key (``code=``) to any host name.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests

from durable_local.host import LocalHost

from .conftest import WEBHOOKS, ServedApp, hook

FORGED = {"Host": "evil.example:666"}


def _urls_of(response: requests.Response) -> list[str]:
    body = response.json()
    found = [value for value in body.values() if isinstance(value, str) and "://" in value]
    location = response.headers.get("Location")
    return [*found, *([location] if location else [])]


def _assert_only(base: str, response: requests.Response) -> None:
    urls = _urls_of(response)
    assert urls, response.text
    assert [u for u in urls if not u.startswith(base + "/")] == []
    assert "evil.example" not in response.text


def test_the_sdks_check_status_response_ignores_a_forged_host(host: LocalHost) -> None:
    response = requests.post(f"{host.base_url}/api/orchestrators/long_wait", headers=FORGED, timeout=30)
    assert response.status_code == 202, response.text
    _assert_only(host.base_url, response)


def test_the_start_webhook_ignores_a_forged_host(host: LocalHost) -> None:
    response = requests.post(hook(host, "orchestrators/long_wait"), json=None, headers=FORGED, timeout=30)
    assert response.status_code == 202, response.text
    _assert_only(host.base_url, response)


def test_the_status_polls_location_ignores_a_forged_host(host: LocalHost) -> None:
    started = requests.post(hook(host, "orchestrators/long_wait"), timeout=30).json()
    response = requests.get(started["statusQueryGetUri"], headers=FORGED, timeout=30)
    assert response.status_code == 202, response.text  # still running: 202 with a Location to poll
    location = response.headers["Location"]
    assert location.startswith(host.base_url + WEBHOOKS + "/instances/"), location


def test_an_http_function_sees_the_configured_base_in_req_url(host: LocalHost) -> None:
    response = requests.get(f"{host.base_url}/api/url?x=1", headers=FORGED, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["url"] == f"{host.base_url}/api/url?x=1"


@pytest.mark.parametrize(
    "path",
    [
        f"{WEBHOOKS}/orchestrators/long_wait",
        f"{WEBHOOKS}/instances",
        f"{WEBHOOKS}/entities",
        "/admin/host/status",
    ],
)
def test_the_hosts_json_answers_say_nosniff(host: LocalHost, path: str) -> None:
    method = "POST" if path.endswith("long_wait") else "GET"
    response = requests.request(method, f"{host.base_url}{path}", timeout=30)
    assert response.headers.get("Content-Type", "").startswith("application/json"), (response.status_code, path)
    assert response.headers.get("X-Content-Type-Options") == "nosniff", (response.status_code, path)


def test_urls_use_website_hostname_when_it_is_set(serve_app: Callable[..., ServedApp]) -> None:
    # The Functions host builds its webhook URLs from WEBSITE_HOSTNAME (Azure sets it; Core Tools sets it to the
    # address it serves unless the environment already has one): https, or http for "localhost:<port>".
    served = serve_app("basic", store="memory", env={"WEBSITE_HOSTNAME": "collector.example.net"})
    response = requests.post(f"{served.base_url}/api/orchestrators/long_wait", headers=FORGED, timeout=30)
    assert response.status_code == 202, response.text
    _assert_only("https://collector.example.net", response)
    seen = requests.get(f"{served.base_url}/api/url", headers=FORGED, timeout=30).json()["url"]
    assert seen == "https://collector.example.net/api/url"
    local = serve_app("basic", store="memory", env={"WEBSITE_HOSTNAME": "localhost:7071"})
    response = requests.post(f"{local.base_url}/api/orchestrators/long_wait", timeout=30)
    _assert_only("http://localhost:7071", response)
