"""Records of the Office 365 Management Activity API, normalised like every source's.

A content blob is a JSON array of records in the Management Activity API's common schema: the same object a
``Search-UnifiedAuditLog`` row carries as its ``AuditData`` (``Id``, ``CreationTime`` without a zone, ``RecordType``
as an integer, ``Operation``, ``Workload``, ...). They are normalised by the Exchange row rules
(``shared.audit.normalise``), their integer ``RecordType`` first named from the schema's ``AuditLogRecordType``
table, so a record reads the same whichever source delivered it (``auditLogRecordType`` in Graph's camelCase).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.audit.normalise import Normalised, exchange_item, raw_text
from shared.audit.ports import MalformedRecord

# fmt: off
RECORD_TYPES: dict[int, str] = {
    1: "ExchangeAdmin", 2: "ExchangeItem", 3: "ExchangeItemGroup", 4: "SharePoint", 6: "SharePointFileOperation",
    7: "OneDrive", 8: "AzureActiveDirectory", 9: "AzureActiveDirectoryAccountLogon", 10: "DataCenterSecurityCmdlet",
    11: "ComplianceDLPSharePoint", 13: "ComplianceDLPExchange", 14: "SharePointSharingOperation",
    15: "AzureActiveDirectoryStsLogon", 16: "SkypeForBusinessPSTNUsage", 17: "SkypeForBusinessUsersBlocked",
    18: "SecurityComplianceCenterEOPCmdlet", 19: "ExchangeAggregatedOperation", 20: "PowerBIAudit", 21: "CRM",
    22: "Yammer", 23: "SkypeForBusinessCmdlets", 24: "Discovery", 25: "MicrosoftTeams", 28: "ThreatIntelligence",
    29: "MailSubmission", 30: "MicrosoftFlow", 31: "AeD", 32: "MicrosoftStream",
    33: "ComplianceDLPSharePointClassification", 34: "ThreatFinder", 35: "Project", 36: "SharePointListOperation",
    37: "SharePointCommentOperation", 38: "DataGovernance", 39: "Kaizala", 40: "SecurityComplianceAlerts",
    41: "ThreatIntelligenceUrl", 42: "SecurityComplianceInsights", 43: "MIPLabel", 44: "VivaInsights",
    45: "PowerAppsApp", 46: "PowerAppsPlan", 47: "ThreatIntelligenceAtpContent", 48: "LabelContentExplorer",
    49: "TeamsHealthcare", 50: "ExchangeItemAggregated", 51: "HygieneEvent", 52: "DataInsightsRestApiAudit",
    53: "InformationBarrierPolicyApplication", 54: "SharePointListItemOperation",
    55: "SharePointContentTypeOperation", 56: "SharePointFieldOperation", 57: "MicrosoftTeamsAdmin", 58: "HRSignal",
    59: "MicrosoftTeamsDevice", 60: "MicrosoftTeamsAnalytics", 61: "InformationWorkerProtection", 62: "Campaign",
    63: "DLPEndpoint", 64: "AirInvestigation", 65: "Quarantine", 66: "MicrosoftForms", 67: "ApplicationAudit",
    68: "ComplianceSupervisionExchange", 69: "CustomerKeyServiceEncryption", 70: "OfficeNative",
    71: "MipAutoLabelSharePointItem", 72: "MipAutoLabelSharePointPolicyLocation", 73: "MicrosoftTeamsShifts",
    75: "MipAutoLabelExchangeItem", 76: "CortanaBriefing", 78: "WDATPAlerts", 79: "PowerAppsResource",
    82: "SensitivityLabelPolicyMatch", 83: "SensitivityLabelAction", 84: "SensitivityLabeledFileAction",
    85: "AttackSim", 86: "AirManualInvestigation", 87: "SecurityComplianceRBAC", 88: "UserTraining",
    89: "AirAdminActionInvestigation", 90: "MSTIC", 91: "PhysicalBadgingSignal", 92: "TeamsEasyApprovals",
    98: "MCASAlerts", 99: "OnPremisesFileShareScannerDlp", 100: "OnPremisesSharePointScannerDlp",
    101: "ExchangeSearch", 102: "SharePointSearch", 103: "PrivacyInsights", 105: "MyAnalyticsSettings",
    106: "SecurityComplianceUserChange", 107: "ComplianceDLPExchangeClassification", 109: "MipExactDataMatch",
    113: "MS365DCustomDetection", 147: "CoreReportingSettings", 148: "ComplianceConnector",
    157: "MipLabelAnalyticsAuditRecord", 164: "ScorePlatformGenericAuditRecord", 174: "DataShareOperation",
    181: "EduDataLakeDownloadOperation", 183: "MicrosoftGraphDataConnectOperation", 186: "PowerPagesSite",
    187: "PowerPlatformAdminDlp", 188: "PlannerPlan", 189: "PlannerCopyPlan", 190: "PlannerTask",
    191: "PlannerRoster", 192: "PlannerPlanList", 193: "PlannerTaskList", 194: "PlannerTenantSettings",
    195: "ProjectForThewebProject", 196: "ProjectForThewebTask", 197: "ProjectForThewebRoadmap",
    198: "ProjectForThewebRoadmapItem", 199: "ProjectForThewebProjectSettings",
    200: "ProjectForThewebRoadmapSettings", 202: "MicrosoftTodoAudit", 206: "MicrosoftTeamsSensitivityLabelAction",
    216: "VivaGoals", 217: "MicrosoftGraphDataConnectConsent", 218: "AttackSimAdmin", 230: "TeamsUpdates",
    231: "PlannerRosterSensitivityLabel", 235: "MicrosoftDefenderForIdentityAudit",
    237: "DefenderExpertsforXDRAdmin", 251: "VfamCreatePolicy", 252: "VfamUpdatePolicy", 253: "VfamDeletePolicy",
    256: "PowerPlatformAdministratorActivity", 257: "Windows365CustomerLockbox", 265: "VivaLearning",
    266: "VivaLearningAdmin", 269: "PeopleAdminSettings", 275: "OWAAuth", 277: "SharePointESignature",
    278: "Dynamics365BusinessCentral", 279: "MeshWorlds", 280: "VivaPulseResponse", 281: "VivaPulseOrganizer",
    282: "VivaPulseAdmin", 283: "VivaPulseReport", 285: "ComplianceDLMExchange", 286: "ComplianceDLMSharePoint",
    287: "ProjectForThewebAssignedToMeSettings", 288: "CloudPolicyService", 291: "SensitiveInfoDiscovered",
    292: "InsiderRiskScopedUserInsights", 293: "MicrosoftTeamsRetentionLabelAction", 294: "AadRiskDetection",
    295: "AuditSearch", 296: "AuditRetentionPolicy", 297: "AuditConfig", 298: "BackupPolicy", 299: "RestoreTask",
    300: "RestoreItem", 301: "BackupItem", 302: "URBACAssignment", 303: "URBACRole", 304: "URBACEnableState",
    306: "PurviewInsiderRiskCases", 307: "PurviewInsiderRiskAlerts", 308: "InsiderRiskScopedUsers",
    310: "CreateCopilotPlugin", 311: "UpdateCopilotPlugin", 312: "DeleteCopilotPlugin", 313: "EnableCopilotPlugin",
    314: "DisableCopilotPlugin", 315: "CreateCopilotWorkspace", 316: "UpdateCopilotWorkspace",
    317: "DeleteCopilotWorkspace", 318: "EnableCopilotWorkspace", 319: "DisableCopilotWorkspace",
    320: "CreateCopilotPromptBook", 321: "UpdateCopilotPromptBook", 322: "DeleteCopilotPromptBook",
    323: "EnableCopilotPromptBook", 324: "DisableCopilotPromptBook", 325: "UpdateCopilotSettings",
    328: "ConnectedAIAppInteraction", 329: "PrivaPrivacyConsentOperation", 330: "PrivaPrivacyAssessmentOperation",
    331: "DataCatalogAccessRequests", 332: "ComplianceSettingsChange", 333: "DataSecurityInvestigation",
    334: "TeamCopilotInteraction", 335: "IRMActivityAuditTrail", 336: "SharePointContentSecurityPolicy",
    337: "CloudUpdateProfileConfig", 338: "CloudUpdateTenantConfig", 339: "CloudUpdateDeviceConfig",
    341: "DeviceDiscoverySettingsExclusion", 342: "DeviceDiscoverySettingsAuthenticatedScans",
    344: "DeviceDiscoverySettings", 345: "USXWorkspaceOnboarding", 346: "VivaGlintAdvancedConfiguration",
    347: "VivaGlintPulseProgram", 348: "VivaGlintPulseProgramRespondentRate", 349: "VivaGlintQuestion",
    350: "VivaGlintRole", 351: "VivaGlintRubicon", 352: "VivaGlintSupportAccess", 353: "VivaGlintSystem",
    354: "VivaGlintUser", 355: "VivaGlintUserGroup", 356: "VivaGlintFeedbackProgram", 357: "FabricAudit",
    358: "TrainableClassifier", 359: "WebContentFiltering", 360: "NoisyAlertPolicy", 361: "DataScanClassification",
    362: "AIInteractionsExport", 363: "Microsoft365CopilotScheduledPrompt", 364: "PlacesDirectory",
    365: "SentinelNotebookOnLake", 366: "SentinelJob", 367: "SentinelKQLOnLake", 368: "SentinelLakeOnboarding",
    369: "SentinelLakeDataOnboarding", 370: "SentinelAITool", 371: "SentinelGraph", 372: "CrossTenantAccessPolicy",
    373: "OutlookCopilotAutomation", 374: "VivaEngageNetworkAssociation", 375: "AppAdminActivity",
    376: "AppSettingsAdminActivity", 377: "UniversalPrintPrintJob", 378: "VivaAmplifyOutlookSensitivityLabel",
    379: "AIInteractionsSubscription", 380: "AIInteractionsChangeNotification",
    381: "FilteringMailMetadataExtended", 382: "OfficeRestrictedModeAction", 383: "CopilotForSecurityTrigger",
    384: "CopilotAgentManagement", 385: "P4AIAssessmentFabricScannerRecord", 386: "PlannerGoal",
    387: "PlannerGoalList", 401: "PlannerChatMessage", 402: "PlannerChatMessageList", 414: "VivaEngageSegment",
    422: "VivaEngageEvents", 427: "UniversalPrintManagement", 430: "PurviewPostureAgent", 431: "GranularBrowseTask",
    444: "TeamsEvalDataHubDataAccess", 445: "TeamsEvalDataHubPermissionChange", 454: "DragonCopilotAdmin",
    462: "MicrosoftTeamsUserConcern", 463: "VivaGlintAgenticCampaign",
}
# fmt: on
"""``AuditLogRecordType`` (office-365-management-activity-api-schema.md, MicrosoftDocs/office-365-management-api
8a539d3): value -> member name. Two rows of the table give a display name with a space (22 "Viva Engage", 216 "Viva
Goals"); the member names are Graph's (``yammer``, ``vivaGoals``). A value missing here is kept as its number, as
one public client found on a live tenant (a quarter of the types it saw were not in the table)."""


def record_type_name(value: Any) -> str | None:
    """The member name of a ``RecordType`` value (an integer, or its digits as text); None when unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int):
        return RECORD_TYPES.get(value)
    return value if isinstance(value, str) and value.strip() else None


def feed_item(raw: Any) -> Normalised:
    """One record of a blob in the common record model, or a quarantine entry holding the raw record."""
    if not isinstance(raw, dict):
        return MalformedRecord(raw=raw_text(raw), reason="record is not a JSON object")
    result = exchange_item({"AuditData": raw, "RecordType": record_type_name(raw.get("RecordType"))})
    if isinstance(result, MalformedRecord):
        return replace(result, raw=raw_text(raw))
    return result
