#!/usr/bin/env bash
# After provisioning (azd runs it as the postprovision hook on Linux and macOS, postprovision.ps1 on Windows; scripts/
# deploy.sh runs it too), with the deployment's outputs in the environment:
#   0. refuses to go on unless az is signed in as the account azd provisioned with (tenant, subscription and, when
#      azd granted the vault roles to a principal, that principal): another account could write a second certificate
#      version or overwrite the budget key;
#   1. makes the audit credential, a self-signed certificate with an exportable key in Key Vault, only when Key Vault
#      answers that it does not exist (az exit code 3, NotFound); a 403 while a new role assignment propagates is
#      retried, any other error stops the hook with nothing written (the app settings refer to the certificate's
#      secret: the PFX the collector signs with);
#   2. writes its public part to .azure/<environment>/, for the app registration;
#   3. makes the tenant budget's key (COLLECTOR_BUDGET_SECRET, docs/budget.md), 32 random bytes, on the same terms:
#      only on NotFound, never rotated, since running collections' budget tokens are checked against it;
#   4. asks the app to resolve its Key Vault references now (otherwise within 24 hours);
#   5. prints the tenant steps with this deployment's names (scripts/tenant-setup.sh does them; docs/deploy.md).
# Never prints or stores the private key or the budget key. Needs: az. Knobs (tests): HOOK_ATTEMPTS (10) tries of a
# call refused with 403, HOOK_RETRY_SECONDS (30) apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
attempts="${HOOK_ATTEMPTS:-10}"
pause="${HOOK_RETRY_SECONDS:-30}"

die() { echo "postprovision: $*" >&2; exit 1; }
need() { [ -n "${!1:-}" ] || die "$1 is not set (run azd provision or scripts/deploy.sh)"; }
for name in AZURE_KEY_VAULT_NAME AUDIT_CERTIFICATE_NAME COLLECTOR_BUDGET_SECRET_NAME AZURE_FUNCTION_ID \
  AZURE_FUNCTION_NAME AZURE_FUNCTION_URL AZURE_TENANT_ID AZURE_SUBSCRIPTION_ID; do
  need "$name"
done
vault="$AZURE_KEY_VAULT_NAME"
cert="$AUDIT_CERTIFICATE_NAME"
budget_secret="$COLLECTOR_BUDGET_SECRET_NAME"
out=".azure/${AZURE_ENV_NAME:-deploy}"
mkdir -p "$out"

# az_call ARGS...: runs az, keeps its output in AZ_OUT, its error text in AZ_ERR and its outcome in AZ_KIND:
# ok, notfound (exit code 3: azure-cli's ResourceNotFoundError, an HTTP 404), forbidden (403 from roles), closed (403
# from the vault's network rules) or error (anything else: a network error, a wrong argument, a vault in another state).
az_call() {
  local err rc
  err=$(mktemp)
  set +e
  AZ_OUT=$(az "$@" 2>"$err")
  rc=$?
  set -e
  AZ_ERR=$(cat "$err")
  rm -f "$err"
  if [ "$rc" = 0 ]; then
    AZ_KIND=ok
  elif [ "$rc" = 3 ]; then
    AZ_KIND=notfound
  elif printf '%s' "$AZ_ERR" | grep -qiE 'ForbiddenByConnection|ForbiddenByFirewall|Public network access is disabled'; then
    AZ_KIND=closed  # a 403 from the vault's network rules, not from roles: waiting does not help
  elif printf '%s' "$AZ_ERR" | grep -qiE 'Forbidden|AuthorizationFailed|status code 403|\(403\)'; then
    AZ_KIND=forbidden
  else
    AZ_KIND=error
  fi
}

first_line() { printf '%s' "$1" | grep -v '^[[:space:]]*$' | head -n 1; }

# az_patient WHAT ARGS...: az_call, tried again while the answer is 403 (a role assignment made by this deployment
# takes minutes to apply), at most $attempts times. Leaves AZ_KIND ok or notfound; stops the hook otherwise.
az_patient() {
  local what="$1" attempt=1
  shift
  while :; do
    az_call "$@"
    case "$AZ_KIND" in
      ok | notfound) return 0 ;;
      forbidden)
        if [ "$attempt" -ge "$attempts" ]; then
          die "$what: still refused (403) after $attempts tries: you need the Key Vault role this deployment grants \
(Key Vault Certificates Officer and Secrets Officer on $vault) or it has not applied yet; nothing was written. \
Run azd provision again later. Azure said: $(first_line "$AZ_ERR")"
        fi
        echo "  $what: not permitted yet (a new role assignment takes a few minutes to apply); trying again in ${pause} s ($attempt/$attempts)"
        attempt=$((attempt + 1))
        sleep "$pause"
        ;;
      closed)
        die "$what: the vault refuses this machine's network (vnetEnabled closes it to public networks), so nothing \
was written. Run the hook from a machine in the virtual network, or open the vault to your address for the time: \
az keyvault update -n $vault --public-network-access Enabled --default-action Deny; az keyvault network-rule add \
-n $vault --ip-address <your public IP>; then azd hooks run postprovision (docs/deploy.md). Azure said: $(first_line "$AZ_ERR")"
        ;;
      *)
        local hint=""
        if printf '%s' "$AZ_ERR" | grep -qi 'deleted but recoverable'; then
          hint=" (it was deleted and is kept by soft delete: az keyvault certificate recover / az keyvault secret recover brings it back)"
        fi
        die "$what failed, so nothing was written$hint. Azure said: $(first_line "$AZ_ERR")"
        ;;
    esac
  done
}

# --- 0. the account -------------------------------------------------------------------------------------------------
az_call account show --query tenantId -o tsv
[ "$AZ_KIND" = ok ] || die "az is not signed in (az login): $(first_line "$AZ_ERR")"
signed_tenant="$AZ_OUT"
az_call account show --query id -o tsv
signed_subscription="$AZ_OUT"
if [ "$signed_tenant" != "$AZURE_TENANT_ID" ] || [ "$signed_subscription" != "$AZURE_SUBSCRIPTION_ID" ]; then
  die "az is signed in to tenant $signed_tenant, subscription $signed_subscription, but this deployment is in tenant \
$AZURE_TENANT_ID, subscription $AZURE_SUBSCRIPTION_ID: refusing to touch its Key Vault. Sign in as the account azd \
uses (az login --tenant $AZURE_TENANT_ID; az account set --subscription $AZURE_SUBSCRIPTION_ID) and run azd provision again."
fi
if [ -n "${AZURE_PRINCIPAL_ID:-}" ]; then
  az_call account show --query user.type -o tsv
  kind="$AZ_OUT"
  az_call account show --query user.name -o tsv
  account="$AZ_OUT"
  if [ "$kind" = servicePrincipal ]; then
    az_call ad sp show --id "$account" --query id -o tsv
  else
    az_call ad signed-in-user show --query id -o tsv
  fi
  [ "$AZ_KIND" = ok ] || die "cannot tell which principal az is signed in as ($account): $(first_line "$AZ_ERR"); \
refusing to write to $vault without knowing it is $AZURE_PRINCIPAL_ID, the principal this deployment granted the vault roles to."
  if [ "$AZ_OUT" != "$AZURE_PRINCIPAL_ID" ]; then
    die "az is signed in as $account (object id $AZ_OUT), but this deployment granted the vault roles to \
$AZURE_PRINCIPAL_ID: refusing to write to $vault. Sign in as that account (az login) or provision as yourself \
(azd env set AZURE_PRINCIPAL_ID <your object id>; azd provision)."
  fi
fi

# --- 1-2. the audit certificate -------------------------------------------------------------------------------------
az_patient "reading the certificate $cert in $vault" keyvault certificate show --vault-name "$vault" --name "$cert" \
  --query id -o tsv
if [ "$AZ_KIND" = ok ]; then
  echo "Key Vault $vault already holds the audit certificate $cert (kept)"
else
  echo "Creating the audit certificate $cert in Key Vault $vault (self-signed, exportable key, 12 months)"
  az_patient "creating the certificate $cert" keyvault certificate create --vault-name "$vault" --name "$cert" \
    --policy @infra/hooks/certificate-policy.json -o none
  [ "$AZ_KIND" = ok ] || die "creating the certificate $cert failed: $(first_line "$AZ_ERR")"
fi

pem="$out/$cert.pem"
rm -f "$pem"
az_patient "downloading the public part of $cert" keyvault certificate download --vault-name "$vault" --name "$cert" \
  --encoding PEM --file "$pem"
[ "$AZ_KIND" = ok ] || die "downloading the public part of $cert failed: $(first_line "$AZ_ERR")"
az_patient "reading the thumbprint of $cert" keyvault certificate show --vault-name "$vault" --name "$cert" \
  --query x509ThumbprintHex -o tsv
thumbprint="$AZ_OUT"

# --- 3. the tenant budget's key -------------------------------------------------------------------------------------
az_patient "reading the budget key $budget_secret in $vault" keyvault secret show --vault-name "$vault" \
  --name "$budget_secret" --query id -o tsv
if [ "$AZ_KIND" = ok ]; then
  echo "Key Vault $vault already holds the tenant budget key $budget_secret (kept: running collections use it)"
else
  echo "Creating the tenant budget key $budget_secret in Key Vault $vault (32 random bytes)"
  key_file=$(mktemp)
  trap 'rm -f "$key_file"' EXIT
  chmod 600 "$key_file"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$key_file"  # 64 hex characters, never on a command line
  az_patient "creating the budget key $budget_secret" keyvault secret set --vault-name "$vault" \
    --name "$budget_secret" --file "$key_file" --encoding utf-8 -o none
  rm -f "$key_file"
  [ "$AZ_KIND" = ok ] || die "creating the budget key $budget_secret failed: $(first_line "$AZ_ERR")"
fi

# --- 4. Key Vault references ----------------------------------------------------------------------------------------
az_call rest --method post -o none \
  --url "${AZURE_FUNCTION_ID}/config/configreferences/appsettings/refresh?api-version=2022-03-01"
if [ "$AZ_KIND" != ok ]; then
  echo "  (could not ask the app to re-read Key Vault references: restart it, az functionapp restart)"
fi

# --- 5. the tenant steps --------------------------------------------------------------------------------------------
app="${AUDIT_CLIENT_ID:-}"
source_name="${COLLECTOR_DEFAULT_SOURCE:-graph}"
cat <<STEPS

Deployed: $AZURE_FUNCTION_URL (function app $AZURE_FUNCTION_NAME)
Audit certificate: $cert in $vault, thumbprint $thumbprint; public part: $pem

Now in the tenant the collector reads (docs/deploy.md, "The tenant steps"), as an administrator of that tenant:
STEPS
if [ -z "$app" ]; then
  cat <<NOAPP
  1. Make the app registration:  az ad app create --display-name ual-collector --query appId -o tsv
  2. Then:  azd env set AUDIT_CLIENT_ID <appId> && azd provision   (or scripts/deploy.sh ... <appId>)
NOAPP
else
  cat <<SETUP
  bash scripts/tenant-setup.sh --app-id $app --cert $pem --source $source_name
    (PowerShell: ./scripts/tenant-setup.ps1 -AppId $app -Cert $pem -Source $source_name)
  It creates the app's service principal, uploads the certificate, grants the API permission by Graph
  appRoleAssignments (or prints the admin consent link) and prints the Exchange role command.
SETUP
fi
cat <<DOCTOR
Check it: curl "$AZURE_FUNCTION_URL/api/doctor?tenantId=${AUDIT_TENANT:-<tenant>.onmicrosoft.com}&source=all&code=<function key>"
  (function key: az functionapp keys list -g ${AZURE_RESOURCE_GROUP:-<resource group>} -n $AZURE_FUNCTION_NAME --query functionKeys.default -o tsv)
DOCTOR
