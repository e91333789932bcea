// Everything the collector needs in one resource group. Called by main.bicep; names come from resourceToken.
// Identity: one user-assigned identity for the host's storage, the output account, Key Vault references,
// Application Insights and the deployment package, so every role exists before the app starts.

param location string
param tags object
param resourceToken string
param auditClientId string
param defaultSource string
param retentionDays string
param taskHubName string
param functionTimeout string
param instanceMemoryMB int
param maximumInstanceCount int
param principalId string
param principalType string
param durableAlwaysReady int

// The production switches (main.bicep sets them from vnetEnabled, enablePurgeProtection and
// allowBasicPublishingCredentials). This module's own defaults are the closed, production side.
@allowed([
  'Enabled'
  'Disabled'
])
@description('Public network access of the storage accounts and the vault: Disabled puts them behind private endpoints in a virtual network the app joins (network.bicep).')
param publicNetworkAccess string = 'Disabled'

@allowed([
  'Allow'
  'Deny'
])
@description('Their firewall default: Deny with public access off (only private endpoints and trusted Azure services).')
param networkDefaultAction string = 'Deny'

@description('Key Vault purge protection: a deleted vault and its certificate cannot be purged before the retention ends.')
param enablePurgeProtection bool = true

@description('SCM and FTP basic (user name and password) publishing credentials; azd and az deploy with Entra ID.')
param allowBasicPublishingCredentials bool = false

var functionAppName = 'func-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'
var outputContainerName = 'ual-output'
var certificateName = 'ual-audit'
var budgetSecretName = 'collector-budget-secret'
var vnetEnabled = publicNetworkAccess == 'Disabled'

// Built-in role definition ids (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles).
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  keyVaultCertificatesOfficer: 'a4417e6f-fecd-4de8-b567-7b0420556985'
  keyVaultSecretsOfficer: 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-${resourceToken}'
  location: location
  tags: tags
}

// --- Monitoring -------------------------------------------------------------------------------------------------

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: 'log-${resourceToken}'
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-${resourceToken}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

// --- The host's storage: task hub (queues, tables, blobs) and the deployment package ----------------------------

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_43:the name is 'st' or 'stout' plus uniqueString's 13 lowercase letters and digits (valid, at most 18 characters); checkov cannot evaluate the interpolation
  // checkov:skip=CKV_AZURE_206:the task hub's state is transient and Durable Functions does not fail over to a secondary region; the output account, which holds what must last, is GRS
  name: 'st${resourceToken}'
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: networkDefaultAction
      bypass: 'AzureServices'
    }
  }
}

resource hostBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: hostStorage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: hostBlobs
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

// --- The output account: chunks, manifests and summaries (what the collection proves) --------------------------

resource outputStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_43:the name is 'st' or 'stout' plus uniqueString's 13 lowercase letters and digits (valid, at most 18 characters); checkov cannot evaluate the interpolation
  name: 'stout${resourceToken}'
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_GRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: networkDefaultAction
      bypass: 'AzureServices'
    }
  }
}

resource outputBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: outputStorage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 14
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 14
    }
  }
}

resource outputContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: outputBlobs
  name: outputContainerName
  properties: {
    publicAccess: 'None'
  }
}

// --- Key Vault: the audit credential (a certificate with an exportable key, made by the postprovision hook) -----

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  // checkov:skip=CKV_AZURE_110:purge protection is on unless enablePurgeProtection is false (its default is true); Key Vault refuses false, so the switch passes null when off (bicep #5223), a conditional checkov cannot evaluate
  // checkov:skip=CKV_AZURE_42:recoverable means soft delete plus purge protection, which is on by default: see CKV_AZURE_110
  name: 'kv-${resourceToken}'
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 7
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: networkDefaultAction
      bypass: 'AzureServices'
    }
  }
}

// --- The production switch vnetEnabled: a virtual network and private endpoints (network.bicep) -----------------

module network 'network.bicep' = if (vnetEnabled) {
  name: 'ual-network-${resourceToken}'
  params: {
    location: location
    tags: tags
    resourceToken: resourceToken
    hostStorageId: hostStorage.id
    outputStorageId: outputStorage.id
    vaultId: vault.id
  }
}

// --- The function app -------------------------------------------------------------------------------------------

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  // checkov:skip=CKV_AZURE_225:Flex Consumption offers zone redundancy only in some regions; after an outage a collection resumes from its durable state (docs/deploy.md)
  name: 'plan-${resourceToken}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  // checkov:skip=CKV_AZURE_222:the HTTP API and live page must be reachable by the operator; every route needs a function key
  // checkov:skip=CKV_AZURE_17:callers authenticate with function keys, not client certificates
  // checkov:skip=CKV_AZURE_13:App Service Authentication (Easy Auth) is optional; the API's routes need a function key (docs/http-api.md)
  // checkov:skip=CKV_AZURE_80:a Python app: no .NET Framework version
  // checkov:skip=CKV_AZURE_88:the app keeps no files: Flex Consumption runs the package from the deployment container, output goes to Blob Storage
  name: functionAppName
  // checkov:skip=CKV_AZURE_65:detailed error pages do not apply: see CKV_AZURE_63
  // checkov:skip=CKV_AZURE_66:failed request tracing does not apply: see CKV_AZURE_63
  location: location
  tags: union(tags, {
    'azd-service-name': 'collector'
  })
  kind: 'functionapp,linux'
  // checkov:skip=CKV_AZURE_212:Flex Consumption scales from zero; a lost instance's work is re-delivered by the task hub's queues
  // checkov:skip=CKV_AZURE_213:Flex Consumption has no App Service health check; the platform manages instances
  // checkov:skip=CKV_AZURE_63:App Service HTTP logs do not apply to Flex Consumption: the host logs to Application Insights
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identity.id}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertEnabled: false
    keyVaultReferenceIdentity: identity.id
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : null
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${hostStorage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identity.id
          }
        }
      }
      scaleAndConcurrency: {
        // Durable Functions on Flex Consumption: one instance of the `durable` group always ready, so timers,
        // orchestrations and entity signals do not wait for a cold start after scale to zero (docs/deploy.md).
        alwaysReady: (durableAlwaysReady > 0) ? [
          {
            name: 'durable'
            instanceCount: durableAlwaysReady
          }
        ] : []
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
  }
  dependsOn: [
    deploymentContainer
    hostBlobOwner
  ]
}

// SCM and FTP basic publishing credentials: off unless allowBasicPublishingCredentials (azd and az deploy with Entra).
resource scmBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'scm'
  properties: {
    allow: allowBasicPublishingCredentials
  }
}

resource ftpBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'ftp'
  properties: {
    allow: allowBasicPublishingCredentials
  }
}

// Every app setting the collector, the Functions host and the libraries read on Azure. The drift test
// (tests/collector/test_infra.py) holds this list against shared/settings.py: what the collector requires on Azure is
// here, and nothing here is unknown to it. Not FUNCTIONS_WORKER_RUNTIME: Flex Consumption rejects it.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  // checkov reads a sites/config resource as a web app: the same waivers as on functionApp
  // checkov:skip=CKV_AZURE_222:the HTTP API and live page must be reachable by the operator; every route needs a function key
  // checkov:skip=CKV_AZURE_17:callers authenticate with function keys, not client certificates
  // checkov:skip=CKV_AZURE_13:App Service Authentication (Easy Auth) is optional; the API's routes need a function key (docs/http-api.md)
  // checkov:skip=CKV_AZURE_80:a Python app: no .NET Framework version
  // checkov:skip=CKV_AZURE_88:the app keeps no files: Flex Consumption runs the package from the deployment container, output goes to Blob Storage
  parent: functionApp
  // checkov:skip=CKV_AZURE_212:Flex Consumption scales from zero; a lost instance's work is re-delivered by the task hub's queues
  // checkov:skip=CKV_AZURE_213:Flex Consumption has no App Service health check; the platform manages instances
  // checkov:skip=CKV_AZURE_63:App Service HTTP logs do not apply to Flex Consumption: the host logs to Application Insights
  name: 'appsettings'
  // checkov:skip=CKV_AZURE_65:detailed error pages do not apply: see CKV_AZURE_63
  // checkov:skip=CKV_AZURE_66:failed request tracing does not apply: see CKV_AZURE_63
  properties: {
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identity.properties.clientId
    AzureWebJobsStorage__blobServiceUri: hostStorage.properties.primaryEndpoints.blob
    AzureWebJobsStorage__queueServiceUri: hostStorage.properties.primaryEndpoints.queue
    AzureWebJobsStorage__tableServiceUri: hostStorage.properties.primaryEndpoints.table
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identity.properties.clientId};Authorization=AAD'
    AzureFunctionsJobHost__functionTimeout: functionTimeout
    PYTHON_THREADPOOL_THREAD_COUNT: '20'
    AZURE_CLIENT_ID: identity.properties.clientId
    TASKHUB_NAME: taskHubName
    AUDIT_CLIENT_ID: auditClientId
    AUDIT_CERTIFICATE: '@Microsoft.KeyVault(VaultName=${vault.name};SecretName=${certificateName})'
    // The tenant budget's key (docs/budget.md): made once by the postprovision hook, never rotated under running
    // collections (the budget entity checks each collection's token with the current key).
    COLLECTOR_BUDGET_SECRET: '@Microsoft.KeyVault(VaultName=${vault.name};SecretName=${budgetSecretName})'
    OUTPUT_STORAGE_ACCOUNT_URL: outputStorage.properties.primaryEndpoints.blob
    OUTPUT_CONTAINER: outputContainerName
    COLLECTOR_DEFAULT_SOURCE: defaultSource
    COLLECTOR_RETENTION_DAYS: retentionDays
  }
  dependsOn: [
    hostQueueContributor
    hostTableContributor
    outputBlobContributor
    vaultSecretsUser
    metricsPublisher
  ]
}

// --- Role assignments (docs/deploy.md lists each with its reason) ---------------------------------

resource hostBlobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, identity.id, roles.storageBlobDataOwner)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataOwner)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource hostQueueContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, identity.id, roles.storageQueueDataContributor)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageQueueDataContributor)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource hostTableContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, identity.id, roles.storageTableDataContributor)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// On the output container only: the identity writes, reads and lists there, and nowhere else in the account.
resource outputBlobContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(outputContainer.id, identity.id, roles.storageBlobDataContributor)
  scope: outputContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataContributor)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource vaultSecretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, identity.id, roles.keyVaultSecretsUser)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, identity.id, roles.monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// The person deploying: creates the certificate and the budget key (postprovision hook) and reads what the collector
// wrote.
resource deployerCertificates 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(vault.id, principalId, roles.keyVaultCertificatesOfficer)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultCertificatesOfficer)
    principalId: principalId
    principalType: principalType
  }
}

resource deployerSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(vault.id, principalId, roles.keyVaultSecretsOfficer)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsOfficer)
    principalId: principalId
    principalType: principalType
  }
}

resource deployerOutputReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(outputContainer.id, principalId, roles.storageBlobDataReader)
  scope: outputContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataReader)
    principalId: principalId
    principalType: principalType
  }
}

output functionAppName string = functionApp.name
output functionAppId string = functionApp.id
output functionAppUrl string = 'https://${functionApp.properties.defaultHostName}'
output keyVaultName string = vault.name
output certificateName string = certificateName
output budgetSecretName string = budgetSecretName
output outputAccountUrl string = outputStorage.properties.primaryEndpoints.blob
output applicationInsightsName string = applicationInsights.name
