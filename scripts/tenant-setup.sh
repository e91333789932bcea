#!/usr/bin/env bash
# The tenant steps after a deployment, with the Azure CLI, signed in to the tenant the collector reads as an
# administrator of it (docs/deploy.md, "The tenant steps"). Each step looks first and changes only what is missing,
# so a re-run is safe:
#   1. the app registration exists in this tenant (az ad app show);
#   2. its service principal: made with az ad sp create only when Graph answers NotFound (an app made with the CLI
#      has none, and without it neither consent nor an Exchange role can be given: AADSTS7000229 at sign-in);
#   3. the certificate (--cert, the .pem the postprovision hook wrote) uploaded to the registration, appended, unless
#      a key with its thumbprint is there already;
#   4. the API permission (graph: Microsoft Graph AuditLogsQuery.Read.All; exchange: Office 365 Exchange Online
#      Exchange.ManageAsApp; feed: Office 365 Management APIs ActivityFeed.Read, what a follower needs to read the
#      Management Activity API; all: the three) requested on the registration and granted by a Graph appRoleAssignment, which is what
#      admin consent makes for an application permission (not az ad app permission admin-consent: azure-cli #12797,
#      #18603). Without the right to grant (Privileged Role Administrator, or Cloud Application Administrator for
#      APIs other than Graph) it prints the admin consent link for someone who has it;
#   5. source exchange: prints the Exchange role commands (Exchange Online PowerShell; no az command assigns it).
# Exit code 0 when every step is done, 1 when one is left (the output says which and who can do it), 2 for bad use.
#   bash scripts/tenant-setup.sh --app-id <appId> [--cert <file.pem>] [--source graph|exchange|feed|all]
set -euo pipefail
app=""
pem=""
source_name="graph"
usage() { grep '^#   bash scripts/tenant-setup.sh' "$0" | sed 's/^# *//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --app-id) app="${2:-}"; shift 2 ;;
    --cert) pem="${2:-}"; shift 2 ;;
    --source) source_name="${2:-}"; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$app" ] || usage
case "$source_name" in graph | exchange | feed | all) ;; *) usage ;; esac
wants() { [ "$source_name" = "$1" ] || [ "$source_name" = all ]; }
[ -z "$pem" ] || [ -f "$pem" ] || { echo "tenant-setup: no certificate file $pem" >&2; exit 2; }

GRAPH_API=00000003-0000-0000-c000-000000000000
EXCHANGE_API=00000002-0000-0ff1-ce00-000000000000
MANAGEMENT_API=c5393580-f805-4401-95e8-94b7a6ef2fc2  # Office 365 Management APIs
die() { echo "tenant-setup: $*" >&2; exit 1; }
left=()

az_call() {  # AZ_OUT, AZ_ERR, AZ_KIND (ok, notfound: exit code 3 = HTTP 404, forbidden, error)
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
  elif printf '%s' "$AZ_ERR" | grep -qiE 'Forbidden|Authorization_RequestDenied|Insufficient privileges|\(403\)'; then
    AZ_KIND=forbidden
  else
    AZ_KIND=error
  fi
}
first_line() { printf '%s' "$1" | grep -v '^[[:space:]]*$' | head -n 1; }

az_call account show --query tenantId -o tsv
[ "$AZ_KIND" = ok ] || die "az is not signed in (az login --tenant <the tenant the collector reads>): $(first_line "$AZ_ERR")"
tenant="$AZ_OUT"
consent_url="https://login.microsoftonline.com/$tenant/adminconsent?client_id=$app"
echo "Tenant $tenant, app $app, source $source_name"

# 1. the registration
az_call ad app show --id "$app" --query appId -o tsv
case "$AZ_KIND" in
  ok) in_home_tenant=yes; echo "  app registration: found" ;;
  notfound)
    in_home_tenant=no
    echo "  app registration: not in this tenant (a multi-tenant app registered elsewhere?); its certificate and" \
      "permission list are changed in its home tenant"
    ;;
  *) die "could not read the app registration $app: $(first_line "$AZ_ERR")" ;;
esac

# 2. the service principal
az_call ad sp show --id "$app" --query id -o tsv
if [ "$AZ_KIND" = notfound ]; then
  az_call ad sp create --id "$app" --query id -o tsv
  [ "$AZ_KIND" = ok ] || die "could not create the service principal of $app: $(first_line "$AZ_ERR") (it needs \
Application Administrator, Cloud Application Administrator or the app's owner)"
  echo "  service principal: created ($AZ_OUT)"
elif [ "$AZ_KIND" = ok ]; then
  echo "  service principal: found ($AZ_OUT)"
else
  die "could not tell whether $app has a service principal, so nothing was created: $(first_line "$AZ_ERR")"
fi
sp="$AZ_OUT"

# 3. the certificate
if [ -n "$pem" ] && [ "$in_home_tenant" = yes ]; then
  thumb=""
  if command -v openssl >/dev/null 2>&1; then
    thumb=$(openssl x509 -in "$pem" -noout -fingerprint -sha1 | sed 's/.*=//; s/://g' | tr 'a-f' 'A-F')
  fi
  az_call ad app credential list --id "$app" --cert --query "[].customKeyIdentifier" -o tsv
  [ "$AZ_KIND" = ok ] || die "could not list the registration's certificates: $(first_line "$AZ_ERR")"
  if [ -n "$thumb" ] && printf '%s\n' "$AZ_OUT" | tr 'a-f' 'A-F' | grep -qx "$thumb"; then
    echo "  certificate: uploaded already (thumbprint $thumb)"
  else
    az_call ad app credential reset --id "$app" --cert "@$pem" --append -o none
    if [ "$AZ_KIND" = ok ]; then
      echo "  certificate: uploaded ($pem, appended: the registration's other keys stay valid)"
    else
      echo "  certificate: NOT uploaded: $(first_line "$AZ_ERR")"
      left+=("upload $pem to the registration (owner or Application Administrator): az ad app credential reset --id $app --cert @$pem --append")
    fi
  fi
elif [ -n "$pem" ]; then
  left+=("upload $pem to the registration in its home tenant: az ad app credential reset --id $app --cert @$pem --append")
fi

# 4. the API permissions, granted by appRoleAssignments
grant() {  # grant <api app id> <role value> <api name>
  local api="$1" value="$2" api_name="$3" resource role body
  az_call ad sp show --id "$api" --query id -o tsv
  [ "$AZ_KIND" = ok ] || die "could not read $api_name's service principal in this tenant: $(first_line "$AZ_ERR")"
  resource="$AZ_OUT"
  az_call ad sp show --id "$api" --query "appRoles[?value=='$value'].id" -o tsv
  role="$AZ_OUT"
  [ "$AZ_KIND" = ok ] && [ -n "$role" ] || die "$api_name has no application permission $value: $(first_line "$AZ_ERR")"
  if [ "$in_home_tenant" = yes ]; then
    az_call ad app permission list --id "$app" --query "[?resourceAppId=='$api'].resourceAccess[].id" -o tsv
    if [ "$AZ_KIND" = ok ] && ! printf '%s\n' "$AZ_OUT" | grep -qx "$role"; then
      az_call ad app permission add --id "$app" --api "$api" --api-permissions "$role=Role"
      [ "$AZ_KIND" = ok ] && echo "  $value: requested on the registration"
    fi
  fi
  az_call rest --method get --url "https://graph.microsoft.com/v1.0/servicePrincipals/$sp/appRoleAssignments" \
    --query "value[?appRoleId=='$role'].resourceId" -o tsv
  [ "$AZ_KIND" = ok ] || die "could not read the app's granted permissions: $(first_line "$AZ_ERR")"
  if printf '%s\n' "$AZ_OUT" | grep -qx "$resource"; then
    echo "  $value: granted already"
    return 0
  fi
  body=$(mktemp)
  printf '{"principalId": "%s", "resourceId": "%s", "appRoleId": "%s"}' "$sp" "$resource" "$role" > "$body"
  az_call rest --method post --url "https://graph.microsoft.com/v1.0/servicePrincipals/$sp/appRoleAssignments" \
    --body "@$body" -o none
  rm -f "$body"
  if [ "$AZ_KIND" = ok ]; then
    echo "  $value: granted (the app's token carries it within minutes)"
  elif [ "$AZ_KIND" = forbidden ]; then
    echo "  $value: NOT granted: your account may not grant application permissions ($(first_line "$AZ_ERR"))"
    left+=("admin consent for $api_name $value: a Privileged Role Administrator (or Global Administrator) opens $consent_url and accepts, or runs this script")
  else
    die "granting $value failed: $(first_line "$AZ_ERR")"
  fi
}
if wants graph; then grant "$GRAPH_API" AuditLogsQuery.Read.All "Microsoft Graph"; fi
if wants exchange; then grant "$EXCHANGE_API" Exchange.ManageAsApp "Office 365 Exchange Online"; fi
if wants feed; then grant "$MANAGEMENT_API" ActivityFeed.Read "Office 365 Management APIs"; fi

# 5. the Exchange role
if wants exchange; then
  cat <<EXO
  Exchange role (not made by this script): in Exchange Online PowerShell (Connect-ExchangeOnline), as an Exchange
  administrator, register the service principal and give it View-Only Audit Logs:
    New-ServicePrincipal -AppId $app -ObjectId $sp -DisplayName ual-collector
    New-ManagementRoleAssignment -App $sp -Role "View-Only Audit Logs"
  or give the service principal $sp the Entra role Compliance Administrator (Entra admin center, Roles).
EXO
fi

if [ ${#left[@]} -eq 0 ]; then
  if wants exchange; then echo "Then the Exchange role above, by an Exchange administrator."; fi
  echo "Done. Check it with doctor (docs/doctor.md): .../api/doctor?tenantId=$tenant&source=$source_name"
  exit 0
fi
echo "Left to do:"
for item in "${left[@]}"; do echo "  - $item"; done
exit 1
