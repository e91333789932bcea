"""A local Microsoft 365 audit API emulator: Entra ID tokens, Graph audit log queries, Exchange Search-UnifiedAuditLog.

See ``m365_emulator/README.md``. Typical use::

    with run_emulator(EmulatorConfig(tenants=[TenantSpec(tenant_id=TID, seed=1)])) as emu:
        emu.register_app(AppRegistration(TID, CLIENT_ID, client_secret="s3cret"))
        ...  # msal authority f"{emu.authority_host}/{TID}", verify=emu.ca_bundle

It knows nothing of the collector (the real adapters run against it unchanged) and is never deployed.

May import: durable_local (its offset clock file, the same format as the local host's).
"""

from __future__ import annotations

from m365_emulator.config import (
    AppRegistration,
    BurstWindow,
    EmulatorConfig,
    ExchangeSettings,
    FaultConfig,
    GraphSettings,
    TenantSpec,
)
from m365_emulator.emulator import Emulator, run_emulator
from m365_emulator.ingestion import IngestionSettings
from m365_emulator.state import Stats

__all__ = [
    "AppRegistration",
    "BurstWindow",
    "Emulator",
    "EmulatorConfig",
    "ExchangeSettings",
    "FaultConfig",
    "GraphSettings",
    "IngestionSettings",
    "Stats",
    "TenantSpec",
    "run_emulator",
]
