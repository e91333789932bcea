"""Run every probe against one tenant, within a time budget, and return one result per probe.

Order of work: settings; the output store; each source's first probes in turn (``shared.doctor.sources``: the Graph
token, permission and the tiny query's creation, then the Exchange probes while the service works on the query); the
tenant steps, read from what the sign-ins and the sources' own steps met (``shared.doctor.tenant_probe``, reported
second); then each source's last probes (Graph: the query's status, one page, the look-up by name and the DELETE).
A probe whose prerequisite failed is reported ``skipped`` with the reason. The audit API calls use the collector's
adapters with the collector's settings, except that retries are bounded tighter (3 attempts, waits of at most 5 s,
30 s per HTTP call) so that an unreachable or failing service is reported within the budget.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from shared.audit.config import AuditApiConfig
from shared.doctor.fixes import TENANT_SETTING, config_failure
from shared.doctor.model import Budget, DoctorReport, ProbeResult, failed, ok, ordered, skipped
from shared.doctor.sources import PROBE_ORDER, SOURCES, chosen
from shared.doctor.storage_probe import probe_storage
from shared.doctor.tenant_probe import tenant_result
from shared.errors import ConfigError
from shared.hosting.azure_settings import hosted_gaps
from shared.requests.validation import InvalidRequest, validate_tenant_id
from shared.settings import Settings

DEFAULT_BUDGET_SECONDS = 300.0
_MAX_ATTEMPTS = 3
_MAX_RETRY_WAIT_SECONDS = 5.0
_HTTP_TIMEOUT_SECONDS = 30.0


def doctor_config(settings: Settings, tenant: str) -> AuditApiConfig:
    """The adapters' config for ``tenant`` from the app settings, with the doctor's tighter retry bounds."""
    config = AuditApiConfig(**settings.audit.config_kwargs(tenant))
    return dataclasses.replace(
        config,
        max_attempts=min(config.max_attempts, _MAX_ATTEMPTS),
        max_retry_wait_seconds=min(config.max_retry_wait_seconds, _MAX_RETRY_WAIT_SECONDS),
        http_timeout_seconds=min(config.http_timeout_seconds, _HTTP_TIMEOUT_SECONDS),
    )


def _probes_for(source: str) -> tuple[str, ...]:
    return ("tenant", "storage", *(probe for doctor in chosen(source) for probe in doctor.probes))


_CREDENTIAL_KINDS = {
    "client_secret": "client secret (AUDIT_CLIENT_SECRET)",
    "certificate": "certificate from AUDIT_CERTIFICATE",
    "certificate_path": "certificate file (AUDIT_CERTIFICATE_PATH)",
}


def _settings_detail(settings: Settings, config: AuditApiConfig) -> str:
    credential = _CREDENTIAL_KINDS[config.credential_setting]
    output = (
        f"blob container {settings.output_container}"
        if settings.sink_kind == "blob"
        else f"folder {settings.output_folder or 'output'}"
    )
    return (
        f"app settings read: app {config.client_id} with a {credential}; authority {config.authority_host}; "
        f"Graph {config.graph_root}; Exchange {config.exchange_root}; output to {output}; query deletion "
        f"{'on' if settings.delete_queries else 'off'}"
    )


def _check_settings(env: Mapping[str, str], tenant: str) -> tuple[ProbeResult, Settings | None, AuditApiConfig | None]:
    try:
        validate_tenant_id(tenant)
    except InvalidRequest as exc:
        return failed("settings", f"{TENANT_SETTING}: {exc.message}", f"give {TENANT_SETTING} correctly"), None, None
    try:
        settings = Settings.from_env(env)
        config = doctor_config(settings, tenant)
    except ConfigError as exc:
        return config_failure("settings", exc), None, None
    gaps = hosted_gaps(env) if settings.hosted_on_azure else []
    if gaps:  # the other probes still run: each may work without what is missing
        detail = f"on Azure ({settings.hosting_plan}) the app settings lack what a deployment needs"
        return failed("settings", detail, "; ".join(gaps)), settings, config
    return ok("settings", _settings_detail(settings, config)), settings, config


def run_doctor(
    env: Mapping[str, str],
    tenant: str,
    source: str = "all",
    *,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> DoctorReport:
    """Probe ``tenant`` with the app settings in ``env`` (``source``: a source's name, or all of them)."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}")
    budget = Budget(budget_seconds, clock)
    results: dict[str, ProbeResult] = {}
    settings_result, settings, config = _check_settings(env, tenant)
    results["settings"] = settings_result
    if settings is None or config is None:
        for probe in _probes_for(source):
            results[probe] = skipped(probe, "needs settings, which failed")
        return DoctorReport(tenant, source, ordered(results.values(), PROBE_ORDER), budget.elapsed())

    results["storage"] = probe_storage(settings)
    doctors = [doctor.build(config, budget, now, sleep) for doctor in chosen(source)]
    for doctor in doctors:
        doctor.begin()
        results.update(doctor.results)
    # Reported second (PROBE_ORDER), made from what the sign-ins and the sources' own steps met: no call of its own.
    results["tenant"] = tenant_result(
        client_id=config.client_id,
        tenant=tenant,
        source=source,
        tokens=[token for doctor in doctors if (token := doctor.sign_in()) is not None],
        steps=[doctor.tenant_step for doctor in doctors],
    )
    for doctor in doctors:
        doctor.end()
        results.update(doctor.results)
    return DoctorReport(tenant, source, ordered(results.values(), PROBE_ORDER), budget.elapsed())
