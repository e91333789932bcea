// The production switch vnetEnabled (main.bicep): a virtual network the function app joins (Flex Consumption virtual
// network integration needs a subnet delegated to Microsoft.App/environments) and private endpoints, with their
// private DNS zones, for everything the app reaches: the host's storage (blob, queue, table: the task hub and the
// deployment package), the output account (blob) and Key Vault. resources.bicep then turns their public network
// access off. docs/deploy.md, "Production switches".

param location string
param tags object
param resourceToken string
param hostStorageId string
param outputStorageId string
param vaultId string

var endpoints = [
  {
    name: 'st-blob'
    target: hostStorageId
    group: 'blob'
    zone: 'privatelink.blob.${environment().suffixes.storage}'
  }
  {
    name: 'st-queue'
    target: hostStorageId
    group: 'queue'
    zone: 'privatelink.queue.${environment().suffixes.storage}'
  }
  {
    name: 'st-table'
    target: hostStorageId
    group: 'table'
    zone: 'privatelink.table.${environment().suffixes.storage}'
  }
  {
    name: 'stout-blob'
    target: outputStorageId
    group: 'blob'
    zone: 'privatelink.blob.${environment().suffixes.storage}'
  }
  {
    name: 'kv-vault'
    target: vaultId
    group: 'vault'
    zone: 'privatelink.vaultcore.azure.net'
  }
]
var zoneNames = [
  'privatelink.blob.${environment().suffixes.storage}'
  'privatelink.queue.${environment().suffixes.storage}'
  'privatelink.table.${environment().suffixes.storage}'
  'privatelink.vaultcore.azure.net'
]

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: 'vnet-${resourceToken}'
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        '10.0.0.0/16'
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: '10.0.1.0/24'
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'private-endpoints'
        properties: {
          addressPrefix: '10.0.2.0/24'
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
    ]
  }
}

resource zones 'Microsoft.Network/privateDnsZones@2020-06-01' = [for zone in zoneNames: {
  name: zone
  location: 'global'
  tags: tags
}]

resource zoneLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = [for (zone, i) in zoneNames: {
  parent: zones[i]
  name: 'link-${resourceToken}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [for endpoint in endpoints: {
  name: 'pe-${endpoint.name}-${resourceToken}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: vnet.properties.subnets[1].id
    }
    privateLinkServiceConnections: [
      {
        name: endpoint.name
        properties: {
          privateLinkServiceId: endpoint.target
          groupIds: [
            endpoint.group
          ]
        }
      }
    ]
  }
}]

resource zoneGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [for (endpoint, i) in endpoints: {
  parent: privateEndpoints[i]
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: replace(endpoint.zone, '.', '-')
        properties: {
          privateDnsZoneId: resourceId('Microsoft.Network/privateDnsZones', endpoint.zone)
        }
      }
    ]
  }
  dependsOn: [
    zones
  ]
}]

output appSubnetId string = vnet.properties.subnets[0].id
