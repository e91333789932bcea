#!/usr/bin/env bash
# After provisioning (azd runs it as the postprovision hook; scripts/deploy.sh runs it too), with the deployment's
# outputs in the environment:
#   1. makes the audit credential, a self-signed certificate with an exportable key in Key Vault, unless the vault
#      already holds one (the app setting AUDIT_CERTIFICATE refers to its secret: the PFX the collector signs with);
#   2. writes its public part to .azure/<environment>/, for the app registration;
#   3. makes the tenant budget's key (COLLECTOR_BUDGET_SECRET, docs/budget.md), 32 random bytes, unless the vault
#      already holds it: it is never rotated, since running collections' budget tokens are checked against it;
#   4. asks the app to resolve its Key Vault references now (otherwise within 24 hours);
#   5. prints the tenant steps with this deployment's names (README, "Deploy to Azure"; docs/deploy.md).
# Never prints or stores the private key or the budget key. Needs: az, logged in as the deploying principal.
set -euo pipefail
cd "$(dirname "$0")/../.."
need() { [ -n "${!1:-}" ] || { echo "postprovision: $1 is not set (run azd provision or scripts/deploy.sh)" >&2; exit 1; }; }
for name in AZURE_KEY_VAULT_NAME AUDIT_CERTIFICATE_NAME COLLECTOR_BUDGET_SECRET_NAME AZURE_FUNCTION_ID AZURE_FUNCTION_NAME AZURE_FUNCTION_URL; do
  need "$name"
done
vault="$AZURE_KEY_VAULT_NAME"
cert="$AUDIT_CERTIFICATE_NAME"
budget_secret="$COLLECTOR_BUDGET_SECRET_NAME"
out=".azure/${AZURE_ENV_NAME:-deploy}"
mkdir -p "$out"

if az keyvault certificate show --vault-name "$vault" --name "$cert" --query id -o tsv >/dev/null 2>&1; then
  echo "Key Vault $vault already holds the audit certificate $cert"
else
  echo "Creating the audit certificate $cert in Key Vault $vault (self-signed, exportable key, 12 months)"
  for attempt in 1 2 3 4 5 6 7 8; do
    if az keyvault certificate create --vault-name "$vault" --name "$cert" \
      --policy @infra/hooks/certificate-policy.json -o none; then
      break
    fi
    if [ "$attempt" = 8 ]; then
      echo "postprovision: could not create the certificate: you need Key Vault Certificates Officer on $vault" >&2
      exit 1
    fi
    echo "  not permitted yet (a new role assignment takes a few minutes to apply); trying again in 30 s"
    sleep 30
  done
fi

pem="$out/$cert.pem"
rm -f "$pem"
az keyvault certificate download --vault-name "$vault" --name "$cert" --encoding PEM --file "$pem"
thumbprint=$(az keyvault certificate show --vault-name "$vault" --name "$cert" --query x509ThumbprintHex -o tsv)

if az keyvault secret show --vault-name "$vault" --name "$budget_secret" --query id -o tsv >/dev/null 2>&1; then
  echo "Key Vault $vault already holds the tenant budget key $budget_secret (kept: running collections use it)"
else
  echo "Creating the tenant budget key $budget_secret in Key Vault $vault (32 random bytes)"
  key_file=$(mktemp)
  trap 'rm -f "$key_file"' EXIT
  chmod 600 "$key_file"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$key_file"  # 64 hex characters, never on a command line
  for attempt in 1 2 3 4 5 6 7 8; do
    if az keyvault secret set --vault-name "$vault" --name "$budget_secret" --file "$key_file" --encoding utf-8 \
      -o none; then
      break
    fi
    if [ "$attempt" = 8 ]; then
      echo "postprovision: could not create the budget key: you need Key Vault Secrets Officer on $vault" >&2
      exit 1
    fi
    echo "  not permitted yet (a new role assignment takes a few minutes to apply); trying again in 30 s"
    sleep 30
  done
  rm -f "$key_file"
fi

if ! az rest --method post -o none \
  --url "${AZURE_FUNCTION_ID}/config/configreferences/appsettings/refresh?api-version=2022-03-01"; then
  echo "  (could not ask the app to re-read Key Vault references: restart it, az functionapp restart)"
fi

app="${AUDIT_CLIENT_ID:-}"
cat <<STEPS

Deployed: $AZURE_FUNCTION_URL (function app $AZURE_FUNCTION_NAME)
Audit certificate: $cert in $vault, thumbprint $thumbprint; public part: $pem

Now in the tenant (README, "Deploy to Azure"; commands in docs/deploy.md):
  1. App registration: ${app:-create one (az ad app create --display-name ual-collector --query appId -o tsv)},
     upload $pem to it (az ad app credential reset --id <appId> --cert @$pem --append) and ask for
     Microsoft Graph AuditLogsQuery.Read.All (graph) and/or Office 365 Exchange Online Exchange.ManageAsApp (exchange).
  2. Admin consent for those permissions (az ad app permission admin-consent --id <appId>).
  3. Exchange only: give the app's service principal a role with View-Only Audit Logs (e.g. Compliance Administrator).
STEPS
if [ -z "$app" ]; then
  echo "  Then: azd env set AUDIT_CLIENT_ID <appId> && azd provision   (or scripts/deploy.sh ... <appId>)"
fi
cat <<DOCTOR
Check it: curl "$AZURE_FUNCTION_URL/api/doctor?tenantId=${AUDIT_TENANT:-<tenant>.onmicrosoft.com}&source=all&code=<function key>"
  (function key: az functionapp keys list -g ${AZURE_RESOURCE_GROUP:-<resource group>} -n $AZURE_FUNCTION_NAME --query functionKeys.default -o tsv)
DOCTOR
