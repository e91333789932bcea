"""Where the app runs, told by the rules the Azure Functions host itself applies to its environment.

The host (azure-functions-host, ``src/WebJobs.Script/Environment/EnvironmentExtensions.cs``) tells its plans apart by
variables the platform sets, never users:

- App Service (Windows Consumption, Premium, Dedicated; Linux Premium and Dedicated): ``WEBSITE_INSTANCE_ID`` is set
  (``IsAppService``); ``WEBSITE_SKU`` is ``Dynamic`` (Consumption), ``ElasticPremium`` (Premium) or an App Service
  plan's SKU; Linux adds ``FUNCTIONS_LOGS_MOUNT_PATH`` (``IsLinuxAppService``).
- Linux Consumption: no ``WEBSITE_INSTANCE_ID``; ``CONTAINER_NAME`` is set and ``LEGION_SERVICE_HOST`` is not
  (``IsLinuxConsumptionOnAtlas``).
- Flex Consumption: ``WEBSITE_SKU`` is ``FlexConsumption``, or (before the site's settings arrive) no
  ``WEBSITE_INSTANCE_ID``, ``CONTAINER_NAME`` or ``WEBSITE_POD_NAME``, and ``LEGION_SERVICE_HOST``
  (``IsFlexConsumptionSku``, ``IsLinuxConsumptionOnLegion``).
- Azure Container Apps: ``MANAGED_ENVIRONMENT`` (``IsManagedAppEnvironment``); Kubernetes (Arc):
  ``KUBERNETES_SERVICE_HOST`` and ``POD_NAMESPACE`` without it (``IsKubernetesManagedHosting``).
- Core Tools: ``FUNCTIONS_CORETOOLS_ENVIRONMENT`` (``IsCoreTools``), which ``func start`` and this repository's
  local host set. It wins over everything else: ``CONTAINER_NAME`` alone is also what a developer's container may
  carry.

``WEBSITE_INSTANCE_ID`` alone misses Linux Consumption and Flex Consumption, where the host treats the app as not on
App Service. Pure: the caller passes the environment.
"""

from __future__ import annotations

from collections.abc import Mapping

LOCAL = "local"
FLEX_CONSUMPTION = "flex_consumption"
LINUX_CONSUMPTION = "linux_consumption"
CONSUMPTION = "consumption"
PREMIUM = "premium"
DEDICATED = "dedicated"
CONTAINER_APPS = "container_apps"
KUBERNETES = "kubernetes"
PLANS = (LOCAL, FLEX_CONSUMPTION, LINUX_CONSUMPTION, CONSUMPTION, PREMIUM, DEDICATED, CONTAINER_APPS, KUBERNETES)

CORE_TOOLS = "FUNCTIONS_CORETOOLS_ENVIRONMENT"
INSTANCE_ID = "WEBSITE_INSTANCE_ID"
SKU = "WEBSITE_SKU"
CONTAINER_NAME = "CONTAINER_NAME"
POD_NAME = "WEBSITE_POD_NAME"
LEGION_SERVICE_HOST = "LEGION_SERVICE_HOST"
LOGS_MOUNT_PATH = "FUNCTIONS_LOGS_MOUNT_PATH"
MANAGED_ENVIRONMENT = "MANAGED_ENVIRONMENT"
KUBERNETES_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"
POD_NAMESPACE = "POD_NAMESPACE"
PLATFORM_SETTINGS = (
    CORE_TOOLS,
    INSTANCE_ID,
    SKU,
    CONTAINER_NAME,
    POD_NAME,
    LEGION_SERVICE_HOST,
    LOGS_MOUNT_PATH,
    MANAGED_ENVIRONMENT,
    KUBERNETES_SERVICE_HOST,
    POD_NAMESPACE,
)
"""Set by the platform or the local host, never by users: not app settings, not in the template."""


def hosting_plan(env: Mapping[str, str]) -> str:
    """One of ``PLANS``: the plan the host's rules see in ``env`` (``local`` when none applies)."""

    def has(name: str) -> bool:
        return bool(env.get(name, "").strip())

    sku = env.get(SKU, "").strip().lower()
    app_service = has(INSTANCE_ID)
    if has(CORE_TOOLS):
        return LOCAL
    if has(MANAGED_ENVIRONMENT):
        return CONTAINER_APPS
    on_legion = not app_service and (has(CONTAINER_NAME) or has(POD_NAME)) and has(LEGION_SERVICE_HOST)
    if sku == "flexconsumption" or on_legion:
        return FLEX_CONSUMPTION
    if not app_service and has(CONTAINER_NAME):
        return LINUX_CONSUMPTION
    if app_service:
        return {"dynamic": CONSUMPTION, "elasticpremium": PREMIUM}.get(sku, DEDICATED)
    if has(KUBERNETES_SERVICE_HOST) and has(POD_NAMESPACE):
        return KUBERNETES
    return LOCAL


def evidence(env: Mapping[str, str]) -> str:
    """The platform variables present in ``env`` (names, and the SKU's value), for messages that name the plan."""
    shown = [f"{SKU}={env[SKU].strip()}" if name == SKU else name for name in PLATFORM_SETTINGS if env.get(name, "")]
    return ", ".join(shown) or "none"
