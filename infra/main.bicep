// The collector on Azure Functions Flex Consumption, from a clone: `azd up` (or scripts/deploy.sh with az only).
// Subscription scope: one resource group per azd environment, so `azd down` removes everything it made.
// What each resource is for and why: docs/deploy.md.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name: names the resource group and seeds the unique resource names.')
param environmentName string

@minLength(1)
@description('Region of every resource; it must offer Flex Consumption (az functionapp list-flexconsumption-locations).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Application (client) id of the Entra app registration that reads the audit log. Empty until you have made it (README, "Deploy to Azure": the tenant steps); set it with azd env set AUDIT_CLIENT_ID and run azd provision again.')
param auditClientId string = ''

@description('The tenant doctor checks after deployment, as its initial domain (contoso.onmicrosoft.com); collections name their tenant in each request. Only printed, never an app setting.')
param auditTenant string = ''

@allowed([
  'graph'
  'exchange'
])
@description('Source of a collection whose request names none (COLLECTOR_DEFAULT_SOURCE).')
param defaultSource string = 'graph'

@description('Oldest start date a request may ask for, in days (COLLECTOR_RETENTION_DAYS): 180 on Audit Standard, 365 with Audit Premium. Text, as azd passes it; the collector checks it.')
param retentionDays string = '180'

@minLength(3)
@maxLength(45)
@description('Durable task hub (TASKHUB_NAME): letters and digits, starting with a letter. Each app on one storage account needs its own.')
param taskHubName string = 'UalCollector'

@description('Longest run of one function (AzureFunctionsJobHost__functionTimeout, over host.json): a chunk export may need more than the 10 minutes host.json allows on every plan.')
param functionTimeout string = '01:00:00'

@allowed([
  512
  2048
  4096
])
@description('Memory of one Flex Consumption instance, in MB.')
param instanceMemoryMB int = 2048

@minValue(40)
@maxValue(1000)
@description('Most Flex Consumption instances the app scales out to.')
param maximumInstanceCount int = 40

@minValue(0)
@maxValue(20)
@description('Always-ready instances of the Flex Consumption `durable` group (orchestrators, activities, entities). Microsoft\'s Durable-on-Flex guidance: 1, so timers, collections and budget signals do not stall after scale to zero; 0 lets the app scale to zero (billed less, slower to resume).')
param durableAlwaysReady int = 1

@description('Production switch: put the storage accounts and Key Vault behind private endpoints in a virtual network the app joins, with their public network access off. Off by default so a first deployment works from any machine: the postprovision hook then writes to the vault from yours (with it on, run the hook from inside the network: docs/deploy.md).')
param vnetEnabled bool = false

@description('Production switch: Key Vault purge protection (on): the vault and the audit certificate cannot be purged before soft delete\'s 7 days end, so azd down --purge leaves the vault and the same environment name cannot be provisioned again until then. Turn off for throw-away environments.')
param enablePurgeProtection bool = true

@description('Production switch: allow SCM and FTP basic publishing credentials (off: azd and az deploy with Entra ID).')
param allowBasicPublishingCredentials bool = false

@description('Object id of the person deploying (azd sets it): may create the audit certificate in Key Vault and read the output. Empty: no access is granted to a person.')
param principalId string = ''

@allowed([
  'User'
  'ServicePrincipal'
])
@description('Kind of principalId: User for a person, ServicePrincipal for a pipeline identity.')
param principalType string = 'User'

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module resources 'resources.bicep' = {
  name: 'ual-collector-${resourceToken}'
  scope: rg
  params: {
    location: location
    tags: tags
    resourceToken: resourceToken
    auditClientId: auditClientId
    defaultSource: defaultSource
    retentionDays: retentionDays
    taskHubName: taskHubName
    functionTimeout: functionTimeout
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    principalId: principalId
    principalType: principalType
    durableAlwaysReady: durableAlwaysReady
    publicNetworkAccess: vnetEnabled ? 'Disabled' : 'Enabled'
    networkDefaultAction: vnetEnabled ? 'Deny' : 'Allow'
    enablePurgeProtection: enablePurgeProtection
    allowBasicPublishingCredentials: allowBasicPublishingCredentials
  }
}

// azd keeps these in the environment (.azure/<env>/.env); the postprovision hook and scripts/deploy.sh read them.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_SUBSCRIPTION_ID string = subscription().subscriptionId
output AZURE_PRINCIPAL_ID string = principalId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_NAME string = resources.outputs.functionAppName
output AZURE_FUNCTION_ID string = resources.outputs.functionAppId
output AZURE_FUNCTION_URL string = resources.outputs.functionAppUrl
output AZURE_KEY_VAULT_NAME string = resources.outputs.keyVaultName
output AUDIT_CERTIFICATE_NAME string = resources.outputs.certificateName
output COLLECTOR_BUDGET_SECRET_NAME string = resources.outputs.budgetSecretName
output AUDIT_CLIENT_ID string = auditClientId
output AUDIT_TENANT string = auditTenant
output OUTPUT_STORAGE_ACCOUNT_URL string = resources.outputs.outputAccountUrl
output APPLICATIONINSIGHTS_NAME string = resources.outputs.applicationInsightsName
