#!/usr/bin/env bash
# Deploy without azd, with the Azure CLI only: the same template (infra/main.bicep), the same postprovision hook,
# then the app's code with a remote build. Re-running updates in place.
#   bash scripts/deploy.sh <environment name> <region> [AUDIT_CLIENT_ID] [AUDIT_TENANT]
# The production switches come from the environment as azd's do: VNET_ENABLED, KEY_VAULT_PURGE_PROTECTION,
# DURABLE_ALWAYS_READY (docs/deploy.md, Production switches).
# Needs: az (logged in: az login), python3. Removes nothing; to remove it all: az group delete -n rg-<environment name>
# (and az keyvault purge -n <vault> to reuse the name at once, unless purge protection is on: then wait 7 days).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
env_name="$1"
location="$2"
client_id="${3:-}"
tenant="${4:-}"
out=".azure/$env_name"
mkdir -p "$out"

principal=$(az ad signed-in-user show --query id -o tsv 2>/dev/null || true)
principal_type=User
if [ -z "$principal" ]; then  # a service principal (pipeline) signed in
  principal=$(az ad sp show --id "$(az account show --query user.name -o tsv)" --query id -o tsv)
  principal_type=ServicePrincipal
fi

echo "Provisioning $env_name in $location"
az deployment sub create --name "ual-collector-$env_name" --location "$location" \
  --template-file infra/main.bicep \
  --parameters environmentName="$env_name" location="$location" principalId="$principal" \
  principalType="$principal_type" auditClientId="$client_id" auditTenant="$tenant" \
  vnetEnabled="${VNET_ENABLED:-false}" enablePurgeProtection="${KEY_VAULT_PURGE_PROTECTION:-true}" \
  durableAlwaysReady="${DURABLE_ALWAYS_READY:-1}" \
  --query properties.outputs -o json > "$out/outputs.json"

# The outputs, as azd would put them in the environment.
eval "$(python3 - "$out/outputs.json" <<'PY'
import json, shlex, sys
for name, output in json.load(open(sys.argv[1])).items():
    print(f"export {name}={shlex.quote(str(output['value']))}")
PY
)"
export AZURE_ENV_NAME="$env_name"
# What azd keeps in its environment besides the outputs: the hook refuses to write unless az is still this account.
AZURE_SUBSCRIPTION_ID=$(az account show --query id -o tsv)
export AZURE_SUBSCRIPTION_ID AZURE_PRINCIPAL_ID="$principal"

bash infra/hooks/postprovision.sh

echo "Deploying the code to $AZURE_FUNCTION_NAME (remote build)"
python3 scripts/package_app.py "$out/app.zip"
az functionapp deployment source config-zip --resource-group "$AZURE_RESOURCE_GROUP" --name "$AZURE_FUNCTION_NAME" \
  --src "$out/app.zip" --build-remote true -o none
echo "Done: $AZURE_FUNCTION_URL"
