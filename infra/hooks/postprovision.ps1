# After provisioning: what postprovision.sh does, for Windows (azd runs this file as the postprovision hook there,
# azure.yaml hooks.postprovision.windows), in PowerShell 7 (pwsh) and Windows PowerShell 5.1 alike:
#   0. refuses to go on unless az is signed in as the account azd provisioned with (tenant, subscription and, when
#      azd granted the vault roles to a principal, that principal);
#   1. makes the audit certificate in Key Vault only when Key Vault answers that it does not exist (az exit code 3,
#      NotFound); a 403 while a new role assignment propagates is retried, any other error stops with nothing written;
#   2. writes its public part to .azure/<environment>/, for the app registration;
#   3. makes the tenant budget's key (32 random bytes) on the same terms, never rotated;
#   4. asks the app to resolve its Key Vault references now;
#   5. prints the tenant steps (scripts/tenant-setup.ps1 does them; docs/deploy.md).
# Never prints or stores the private key or the budget key. Knobs (tests): HOOK_ATTEMPTS (10) tries of a call refused
# with 403, HOOK_RETRY_SECONDS (30) apart.
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 3.0
Set-Location -LiteralPath (Resolve-Path -LiteralPath (Join-Path $PSScriptRoot '../..')).Path
$attempts = 10
if ($env:HOOK_ATTEMPTS) { $attempts = [int]$env:HOOK_ATTEMPTS }
$pause = 30
if ($env:HOOK_RETRY_SECONDS) { $pause = [int]$env:HOOK_RETRY_SECONDS }

function Stop-Hook([string]$Message) {
    [Console]::Error.WriteLine("postprovision: $Message")
    exit 1
}

foreach ($name in 'AZURE_KEY_VAULT_NAME', 'AUDIT_CERTIFICATE_NAME', 'COLLECTOR_BUDGET_SECRET_NAME', 'AZURE_FUNCTION_ID',
    'AZURE_FUNCTION_NAME', 'AZURE_FUNCTION_URL', 'AZURE_TENANT_ID', 'AZURE_SUBSCRIPTION_ID') {
    if (-not [Environment]::GetEnvironmentVariable($name)) {
        Stop-Hook "$name is not set (run azd provision or scripts/deploy.sh)"
    }
}
$vault = $env:AZURE_KEY_VAULT_NAME
$cert = $env:AUDIT_CERTIFICATE_NAME
$budgetSecret = $env:COLLECTOR_BUDGET_SECRET_NAME
$envName = 'deploy'
if ($env:AZURE_ENV_NAME) { $envName = $env:AZURE_ENV_NAME }
$out = Join-Path '.azure' $envName
New-Item -ItemType Directory -Force -Path $out | Out-Null

# Invoke-Az ARGS...: runs az; Kind is ok, notfound (exit code 3: azure-cli's ResourceNotFoundError, an HTTP 404),
# forbidden (403 from roles), closed (403 from the vault's network rules) or error (anything else: a network error,
# a wrong argument, a vault in another state).
function Invoke-Az {
    $errFile = [System.IO.Path]::GetTempFileName()
    $saved = $ErrorActionPreference
    $ErrorActionPreference = 'Continue'  # Windows PowerShell 5.1 turns redirected native stderr into errors
    try {
        $lines = & az @args 2> $errFile
        $code = $LASTEXITCODE
    }
    finally {
        $ErrorActionPreference = $saved
    }
    $err = [System.IO.File]::ReadAllText($errFile)
    Remove-Item -LiteralPath $errFile -Force
    $kind = 'error'
    if ($code -eq 0) { $kind = 'ok' }
    elseif ($code -eq 3) { $kind = 'notfound' }
    elseif ($err -match 'ForbiddenByConnection|ForbiddenByFirewall|Public network access is disabled') { $kind = 'closed' }
    elseif ($err -match 'Forbidden|AuthorizationFailed|status code 403|\(403\)') { $kind = 'forbidden' }
    $text = (@($lines) | ForEach-Object { "$_" }) -join "`n"
    return [pscustomobject]@{ Kind = $kind; Out = $text.Trim(); Err = $err }
}

function Get-FirstLine([string]$Text) {
    $line = @($Text -split "`n" | Where-Object { $_.Trim() }) | Select-Object -First 1
    if ($null -eq $line) { return '' }
    return $line.Trim()
}

# Invoke-AzPatient WHAT ARGS...: Invoke-Az, tried again while the answer is 403, at most $attempts times. Returns a
# result whose Kind is ok or notfound; stops the hook otherwise.
function Invoke-AzPatient {
    $what = $args[0]
    $rest = @($args | Select-Object -Skip 1)
    $attempt = 1
    while ($true) {
        $r = Invoke-Az @rest
        if ($r.Kind -eq 'ok' -or $r.Kind -eq 'notfound') { return $r }
        if ($r.Kind -eq 'forbidden') {
            if ($attempt -ge $attempts) {
                Stop-Hook ("${what}: still refused (403) after $attempts tries: you need the Key Vault role this " +
                    "deployment grants (Key Vault Certificates Officer and Secrets Officer on $vault) or it has not " +
                    "applied yet; nothing was written. Run azd provision again later. Azure said: " +
                    (Get-FirstLine $r.Err))
            }
            Write-Host "  ${what}: not permitted yet (a new role assignment takes a few minutes to apply); trying again in $pause s ($attempt/$attempts)"
            $attempt += 1
            Start-Sleep -Seconds $pause
            continue
        }
        if ($r.Kind -eq 'closed') {
            Stop-Hook ("${what}: the vault refuses this machine's network (vnetEnabled closes it to public networks), " +
                "so nothing was written. Run the hook from a machine in the virtual network, or open the vault to your " +
                "address for the time: az keyvault update -n $vault --public-network-access Enabled --default-action " +
                "Deny; az keyvault network-rule add -n $vault --ip-address <your public IP>; then azd hooks run " +
                "postprovision (docs/deploy.md). Azure said: $(Get-FirstLine $r.Err)")
        }
        $hint = ''
        if ($r.Err -match 'deleted but recoverable') {
            $hint = ' (it was deleted and is kept by soft delete: az keyvault certificate recover / az keyvault secret recover brings it back)'
        }
        Stop-Hook "$what failed, so nothing was written$hint. Azure said: $(Get-FirstLine $r.Err)"
    }
}

# --- 0. the account -------------------------------------------------------------------------------------------------
$r = Invoke-Az account show --query tenantId -o tsv
if ($r.Kind -ne 'ok') { Stop-Hook "az is not signed in (az login): $(Get-FirstLine $r.Err)" }
$signedTenant = $r.Out
$signedSubscription = (Invoke-Az account show --query id -o tsv).Out
if ($signedTenant -ne $env:AZURE_TENANT_ID -or $signedSubscription -ne $env:AZURE_SUBSCRIPTION_ID) {
    Stop-Hook ("az is signed in to tenant $signedTenant, subscription $signedSubscription, but this deployment is in " +
        "tenant $($env:AZURE_TENANT_ID), subscription $($env:AZURE_SUBSCRIPTION_ID): refusing to touch its Key Vault. " +
        "Sign in as the account azd uses (az login --tenant $($env:AZURE_TENANT_ID); az account set --subscription " +
        "$($env:AZURE_SUBSCRIPTION_ID)) and run azd provision again.")
}
if ($env:AZURE_PRINCIPAL_ID) {
    $kind = (Invoke-Az account show --query user.type -o tsv).Out
    $account = (Invoke-Az account show --query user.name -o tsv).Out
    if ($kind -eq 'servicePrincipal') { $r = Invoke-Az ad sp show --id $account --query id -o tsv }
    else { $r = Invoke-Az ad signed-in-user show --query id -o tsv }
    if ($r.Kind -ne 'ok') {
        Stop-Hook ("cannot tell which principal az is signed in as (${account}): $(Get-FirstLine $r.Err); refusing " +
            "to write to $vault without knowing it is $($env:AZURE_PRINCIPAL_ID), the principal this deployment " +
            "granted the vault roles to.")
    }
    if ($r.Out -ne $env:AZURE_PRINCIPAL_ID) {
        Stop-Hook ("az is signed in as $account (object id $($r.Out)), but this deployment granted the vault roles " +
            "to $($env:AZURE_PRINCIPAL_ID): refusing to write to $vault. Sign in as that account (az login) or " +
            "provision as yourself (azd env set AZURE_PRINCIPAL_ID <your object id>; azd provision).")
    }
}

# --- 1-2. the audit certificate -------------------------------------------------------------------------------------
$r = Invoke-AzPatient "reading the certificate $cert in $vault" keyvault certificate show --vault-name $vault `
    --name $cert --query id -o tsv
if ($r.Kind -eq 'ok') {
    Write-Host "Key Vault $vault already holds the audit certificate $cert (kept)"
}
else {
    Write-Host "Creating the audit certificate $cert in Key Vault $vault (self-signed, exportable key, 12 months)"
    $r = Invoke-AzPatient "creating the certificate $cert" keyvault certificate create --vault-name $vault `
        --name $cert --policy '@infra/hooks/certificate-policy.json' -o none
    if ($r.Kind -ne 'ok') { Stop-Hook "creating the certificate $cert failed: $(Get-FirstLine $r.Err)" }
}

$pem = Join-Path $out "$cert.pem"
if (Test-Path -LiteralPath $pem) { Remove-Item -LiteralPath $pem -Force }
$r = Invoke-AzPatient "downloading the public part of $cert" keyvault certificate download --vault-name $vault `
    --name $cert --encoding PEM --file $pem
if ($r.Kind -ne 'ok') { Stop-Hook "downloading the public part of $cert failed: $(Get-FirstLine $r.Err)" }
$thumbprint = (Invoke-AzPatient "reading the thumbprint of $cert" keyvault certificate show --vault-name $vault `
        --name $cert --query x509ThumbprintHex -o tsv).Out

# --- 3. the tenant budget's key -------------------------------------------------------------------------------------
$r = Invoke-AzPatient "reading the budget key $budgetSecret in $vault" keyvault secret show --vault-name $vault `
    --name $budgetSecret --query id -o tsv
if ($r.Kind -eq 'ok') {
    Write-Host "Key Vault $vault already holds the tenant budget key $budgetSecret (kept: running collections use it)"
}
else {
    Write-Host "Creating the tenant budget key $budgetSecret in Key Vault $vault (32 random bytes)"
    $bytes = New-Object byte[] 32
    $rng = [System.Security.Cryptography.RandomNumberGenerator]::Create()
    $rng.GetBytes($bytes)
    $rng.Dispose()
    $keyFile = [System.IO.Path]::GetTempFileName()
    try {
        # 64 hex characters, never on a command line
        [System.IO.File]::WriteAllText($keyFile, (($bytes | ForEach-Object { $_.ToString('x2') }) -join ''))
        $r = Invoke-AzPatient "creating the budget key $budgetSecret" keyvault secret set --vault-name $vault `
            --name $budgetSecret --file $keyFile --encoding utf-8 -o none
    }
    finally {
        Remove-Item -LiteralPath $keyFile -Force -ErrorAction SilentlyContinue
    }
    if ($r.Kind -ne 'ok') { Stop-Hook "creating the budget key $budgetSecret failed: $(Get-FirstLine $r.Err)" }
}

# --- 4. Key Vault references ----------------------------------------------------------------------------------------
$r = Invoke-Az rest --method post -o none `
    --url "$($env:AZURE_FUNCTION_ID)/config/configreferences/appsettings/refresh?api-version=2022-03-01"
if ($r.Kind -ne 'ok') {
    Write-Host '  (could not ask the app to re-read Key Vault references: restart it, az functionapp restart)'
}

# --- 5. the tenant steps --------------------------------------------------------------------------------------------
$app = $env:AUDIT_CLIENT_ID
$sourceName = 'graph'
if ($env:COLLECTOR_DEFAULT_SOURCE) { $sourceName = $env:COLLECTOR_DEFAULT_SOURCE }
Write-Host ''
Write-Host "Deployed: $($env:AZURE_FUNCTION_URL) (function app $($env:AZURE_FUNCTION_NAME))"
Write-Host "Audit certificate: $cert in $vault, thumbprint $thumbprint; public part: $pem"
Write-Host ''
Write-Host 'Now in the tenant the collector reads (docs/deploy.md, "The tenant steps"), as an administrator of that tenant:'
if (-not $app) {
    Write-Host '  1. Make the app registration:  az ad app create --display-name ual-collector --query appId -o tsv'
    Write-Host '  2. Then:  azd env set AUDIT_CLIENT_ID <appId>; azd provision   (or scripts/deploy.sh ... <appId>)'
}
else {
    Write-Host "  ./scripts/tenant-setup.ps1 -AppId $app -Cert $pem -Source $sourceName"
    Write-Host "    (bash: bash scripts/tenant-setup.sh --app-id $app --cert $pem --source $sourceName)"
    Write-Host "  It creates the app's service principal, uploads the certificate, grants the API permission by Graph"
    Write-Host '  appRoleAssignments (or prints the admin consent link) and prints the Exchange role command.'
}
$tenantName = '<tenant>.onmicrosoft.com'
if ($env:AUDIT_TENANT) { $tenantName = $env:AUDIT_TENANT }
$group = '<resource group>'
if ($env:AZURE_RESOURCE_GROUP) { $group = $env:AZURE_RESOURCE_GROUP }
Write-Host "Check it: curl `"$($env:AZURE_FUNCTION_URL)/api/doctor?tenantId=$tenantName&source=all&code=<function key>`""
Write-Host "  (function key: az functionapp keys list -g $group -n $($env:AZURE_FUNCTION_NAME) --query functionKeys.default -o tsv)"
