"""The settings every test host of the collector starts with: the app as Azure runs it, plus named conveniences.

**The hosted profile** is what the deployment template (``infra/resources.bicep``) sets, with a local value for each
setting a local host can have: the task hub, the tenant budget's key (``COLLECTOR_BUDGET_SECRET``: required on Azure,
so every test host signs and checks what Azure signs and checks), the default source and retention the template
passes, the app registration. Everything the template leaves unset keeps the code's default there, so it is left unset
here too: the tenant budget is on (B = 6 for Graph, 3 for Exchange; the daily Graph quota kept), polls and retries are
the production ones.
``tests/collector/test_hosted_profile.py`` holds this profile to the template and to
``shared.hosting.azure_settings`` (what Azure requires), so the two cannot drift apart.

**Conveniences** are what a local test needs and a deployment never has. Each is named and opted into by name
(``E2E_CONVENIENCES`` is what the end-to-end hosts take), so a reader sees exactly where a test departs from Azure:
short polls and back-offs, an output folder the test can read, fixed 2024 dates inside the retention, a client secret
the emulator checks instead of a Key Vault certificate.

A test that must run **unlike** Azure (no budget key, no budget) says so with ``deviations``; changing a hosted
setting any other way is refused (``checked``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shared.settings import BUDGET_KEY_SETTING, TASK_HUB_SETTING

TEMPLATE_DEFAULTS = {
    TASK_HUB_SETTING: "UalCollector",
    "COLLECTOR_DEFAULT_SOURCE": "graph",
    "COLLECTOR_RETENTION_DAYS": "180",
    "PYTHON_THREADPOOL_THREAD_COUNT": "20",
    "OUTPUT_CONTAINER": "ual-output",
}
"""The values ``infra/main.bicep`` passes by default for the settings the template takes from its parameters."""

BUDGET_SECRET = "e2e-hosted-profile-budget-key-0123456789abcdef-not-a-real-secret"
"""The tenant budget's key of every test host (a fixed value, so a host restarted on its store keeps it; at least
``BUDGET_KEY_CHARS`` characters like the one the deployment makes)."""

AZURE_ONLY = frozenset(
    {
        "AzureWebJobsStorage__credential",
        "AzureWebJobsStorage__clientId",
        "AzureWebJobsStorage__blobServiceUri",
        "AzureWebJobsStorage__queueServiceUri",
        "AzureWebJobsStorage__tableServiceUri",
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
        "AzureFunctionsJobHost__functionTimeout",
        "AZURE_CLIENT_ID",
        "AUDIT_CERTIFICATE",
        "OUTPUT_STORAGE_ACCOUNT_URL",
    }
)
"""Template settings a local host has no use for or stands in for: the task hub's storage (the local engine's own
store), Application Insights, the host's function timeout, the managed identity, and the two replaced by named
conveniences (the Key Vault certificate by ``client_secret``, the blob account by ``output_folder``)."""

BUDGETS = ("COLLECTOR_BUDGET_GRAPH", "COLLECTOR_BUDGET_EXCHANGE", "COLLECTOR_BUDGET_FEED")
GUARDED = (TASK_HUB_SETTING, BUDGET_KEY_SETTING, *BUDGETS)
"""Settings a test may only change through ``deviations``: the hub, the budget key, and turning a budget off."""


@dataclass(frozen=True, slots=True)
class Convenience:
    """A local-only departure from Azure, with why a test wants it."""

    why: str
    settings: Mapping[str, str]


def conveniences(output: Path) -> dict[str, Convenience]:
    return {
        "fast_polls": Convenience(
            "polls, retries and HTTP back-offs of a tenth of a second, so no test sleeps through a production wait; a "
            "query still unfinished after 40 checks (about 10 s at these polls, where production gives up after four "
            "hours) is given up on and submitted again, so a query the emulator leaves running for good (its default "
            "stuck_rate) costs seconds, not the 240 checks of the default",
            {
                "AUDIT_MAX_RETRY_WAIT_SECONDS": "0.05",
                "COLLECTOR_POLL_INTERVAL_SECONDS": "0.1",
                "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": "0.2",
                "COLLECTOR_MAX_POLLS": "40",
                "COLLECTOR_RETRY_BASE_SECONDS": "0.1",
                "COLLECTOR_RETRY_MAX_SECONDS": "0.5",
            },
        ),
        "short_executions": Convenience(
            "continue-as-new every 10 chunk starts instead of 20, so small collections switch executions too",
            {"COLLECTOR_CHUNKS_PER_EXECUTION": "10"},
        ),
        "output_folder": Convenience(
            "a local folder the test reads back, in place of the blob account", {"OUTPUT_FOLDER": str(output)}
        ),
        "long_retention": Convenience(
            "fixed 2024 dates count as inside the tenant's retention (no window flagged possibly partial)",
            {"COLLECTOR_RETENTION_DAYS": "3650"},
        ),
        "client_secret": Convenience(
            "the emulator's app secret in place of the Key Vault certificate (a certificate's assertion would be "
            "dated by the wall clock, not by a test's moved clock)",
            {},  # filled by ``hosted_env`` with the registration's secret
        ),
    }


E2E_CONVENIENCES = ("fast_polls", "short_executions", "output_folder", "long_retention", "client_secret")
"""What every end-to-end host of the collector takes, unless a test names others."""


def hosted(*, client_id: str) -> dict[str, str]:
    """The hosted profile: the template's settings with local values (the audit endpoints come with the emulator)."""
    return {**TEMPLATE_DEFAULTS, "AUDIT_CLIENT_ID": client_id, BUDGET_KEY_SETTING: BUDGET_SECRET}


def hosted_env(
    *,
    client_id: str,
    client_secret: str,
    endpoints: Mapping[str, str],
    output: Path,
    use: tuple[str, ...] = E2E_CONVENIENCES,
    deviations: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The collector's settings for a test host: the hosted profile, the emulator's ``endpoints`` (``AUDIT_*`` URLs
    and CA), the conveniences named in ``use``, then ``deviations`` (a hosted setting run otherwise; "" unsets it)."""
    known = conveniences(output)
    unknown = [name for name in use if name not in known]
    if unknown:
        raise ValueError(f"no convenience {unknown}; known: {sorted(known)}")
    env = {**hosted(client_id=client_id), **endpoints}
    for name in use:
        env.update(known[name].settings)
        if name == "client_secret":
            env["AUDIT_CLIENT_SECRET"] = client_secret
    for name, value in (deviations or {}).items():
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    return env


def checked(extra: Mapping[str, str] | None, *, base: Mapping[str, str]) -> dict[str, str]:
    """``extra`` settings of a test, refused when they change a guarded hosted setting (use ``deviations``)."""
    extra = dict(extra or {})
    for name in GUARDED:
        if name in extra and extra[name] != base.get(name) and not _keeps_budget(name, extra[name]):
            raise AssertionError(
                f"{name}={extra[name]!r} departs from the hosted profile: pass it as deviations={{...}} so the test "
                "says it does not run as deployed"
            )
    return extra


def _keeps_budget(name: str, value: str) -> bool:
    """A test may size a budget (B = 2 to see contention); turning it off is a deviation."""
    return name in BUDGETS and value.strip() not in ("", "0")
