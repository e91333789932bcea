"""A func.FunctionApp + df.Blueprint app, served with --require-keys."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import requests

from tests.host.conftest import ServedApp, wait_for_status


def _printed_keys(served: ServedApp) -> dict[str, str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = served.log()
        found = dict(
            re.findall(
                r"^(Function key \(default\)|Master key|System key \(durabletask_extension\)): (\S+)$",
                text,
                re.MULTILINE,
            )
        )
        if len(found) == 3:
            return {"function": found["Function key (default)"], "master": found["Master key"]}
        time.sleep(0.05)
    raise AssertionError(f"keys were not printed:\n{served.log()}")


def test_keys_are_required_and_printed_keys_work(serve_app: Callable[..., ServedApp]) -> None:
    served = serve_app("blueprint", store="memory", extra=["--require-keys"])
    keys = _printed_keys(served)
    base = served.base_url
    assert requests.post(f"{base}/v1/hello/ada", timeout=10).status_code == 401
    assert requests.post(f"{base}/v1/hello/ada?code=wrong", timeout=10).status_code == 401
    started = requests.post(f"{base}/v1/hello/ada", headers={"x-functions-key": keys["function"]}, timeout=30)
    assert started.status_code == 202, started.text
    links = started.json()
    assert "code=" in links["statusQueryGetUri"]
    final = wait_for_status(links["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", "HELLO ADA")
    bare = links["statusQueryGetUri"].split("?")[0]
    assert requests.get(bare, timeout=10).status_code == 401
    assert requests.get(f"{bare}?code={keys['function']}", timeout=10).status_code == 401
    assert requests.get(f"{bare}?code={keys['master']}", timeout=10).status_code == 200
    assert requests.get(f"{base}/v1/admin-only?code={keys['function']}", timeout=10).status_code == 401
    assert requests.get(f"{base}/v1/admin-only?code={keys['master']}", timeout=10).text == "admin ok"
    assert requests.get(f"{base}/v1/open", timeout=10).text == "open ok"
    assert requests.get(f"{base}/api/open", timeout=10).status_code == 404  # the route prefix is v1
