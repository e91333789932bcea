"""checkov policy CKV_UAL_1: the function app's app settings meet what the collector requires on Azure.

The rule is ``shared.hosting.azure_settings.hosted_gaps`` (the same the drift test and doctor apply), so a setting
dropped from ``infra/resources.bicep`` fails the scan. Loaded by ``checkov --external-checks-dir infra/checks/checkov``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from checkov.bicep.checks.resource.base_resource_check import BaseResourceCheck
from checkov.common.models.enums import CheckCategories, CheckResult

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from shared.hosting.azure_settings import hosted_gaps  # the repository root is on the path only now


class AppSettingsForAzure(BaseResourceCheck):
    def __init__(self) -> None:
        super().__init__(
            name="Ensure the function app sets every app setting the collector requires on Azure",
            id="CKV_UAL_1",
            categories=(CheckCategories.GENERAL_SECURITY,),
            supported_resources=("Microsoft.Web/sites/config",),
        )

    def scan_resource_conf(self, conf: dict[str, Any]) -> CheckResult:
        if conf.get("name") != "appsettings":
            return CheckResult.UNKNOWN
        self.evaluated_keys = ["properties"]
        properties = conf.get("properties")
        if not isinstance(properties, dict):
            return CheckResult.FAILED
        # Values are Bicep expressions here; only presence counts (the credential's literal is kept as written).
        values = {name: value if isinstance(value, str) and value else "set" for name, value in properties.items()}
        gaps = hosted_gaps(values)
        self.details = gaps  # checkov prints them under the failed check
        return CheckResult.FAILED if gaps else CheckResult.PASSED


check = AppSettingsForAzure()
