# The tenant steps after a deployment: what tenant-setup.sh does, in PowerShell 7 (pwsh) or Windows PowerShell 5.1,
# with the Azure CLI signed in to the tenant the collector reads as an administrator of it (docs/deploy.md). Each
# step looks first and changes only what is missing, so a re-run is safe:
#   1. the app registration exists in this tenant;
#   2. its service principal, made only when Graph answers NotFound (AADSTS7000229 at sign-in without it);
#   3. the certificate (-Cert, the .pem the postprovision hook wrote) uploaded, appended, unless its thumbprint is there;
#   4. the API permission (graph, exchange, feed: ActivityFeed.Read of the Office 365 Management APIs; all: the
#      three) requested and granted by a Graph appRoleAssignment (not az ad app permission admin-consent:
#      azure-cli #12797, #18603); without the right to grant, the admin consent link for someone who has it;
#   5. source exchange: the Exchange role commands, printed.
# Exit code 0 when every step is done, 1 when one is left (the output says which), 2 for bad use.
#   ./scripts/tenant-setup.ps1 -AppId <appId> [-Cert <file.pem>] [-Source graph|exchange|feed|all]
param(
    [Parameter(Mandatory = $true)][string]$AppId,
    [string]$Cert = '',
    [ValidateSet('graph', 'exchange', 'feed', 'all')][string]$Source = 'graph'
)
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 3.0
if ($Cert -and -not (Test-Path -LiteralPath $Cert -PathType Leaf)) {
    [Console]::Error.WriteLine("tenant-setup: no certificate file $Cert")
    exit 2
}
$GraphApi = '00000003-0000-0000-c000-000000000000'
$ExchangeApi = '00000002-0000-0ff1-ce00-000000000000'
$ManagementApi = 'c5393580-f805-4401-95e8-94b7a6ef2fc2'  # Office 365 Management APIs
function Test-Wants([string]$Name) { return ($Source -eq $Name -or $Source -eq 'all') }
$script:left = @()

function Stop-Setup([string]$Message) {
    [Console]::Error.WriteLine("tenant-setup: $Message")
    exit 1
}

# Invoke-Az ARGS...: Kind is ok, notfound (exit code 3: an HTTP 404), forbidden or error.
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
    elseif ($err -match 'Forbidden|Authorization_RequestDenied|Insufficient privileges|\(403\)') { $kind = 'forbidden' }
    $text = (@($lines) | ForEach-Object { "$_" }) -join "`n"
    return [pscustomobject]@{ Kind = $kind; Out = $text.Trim(); Err = $err }
}

function Get-FirstLine([string]$Text) {
    $line = @($Text -split "`n" | Where-Object { $_.Trim() }) | Select-Object -First 1
    if ($null -eq $line) { return '' }
    return $line.Trim()
}

function Get-Lines([string]$Text) {
    return @($Text -split "`n" | ForEach-Object { $_.Trim() } | Where-Object { $_ })
}

$r = Invoke-Az account show --query tenantId -o tsv
if ($r.Kind -ne 'ok') { Stop-Setup "az is not signed in (az login --tenant <the tenant the collector reads>): $(Get-FirstLine $r.Err)" }
$tenant = $r.Out
$consentUrl = "https://login.microsoftonline.com/$tenant/adminconsent?client_id=$AppId"
Write-Host "Tenant $tenant, app $AppId, source $Source"

# 1. the registration
$r = Invoke-Az ad app show --id $AppId --query appId -o tsv
if ($r.Kind -eq 'ok') { $inHomeTenant = $true; Write-Host '  app registration: found' }
elseif ($r.Kind -eq 'notfound') {
    $inHomeTenant = $false
    Write-Host ('  app registration: not in this tenant (a multi-tenant app registered elsewhere?); its certificate ' +
        'and permission list are changed in its home tenant')
}
else { Stop-Setup "could not read the app registration ${AppId}: $(Get-FirstLine $r.Err)" }

# 2. the service principal
$r = Invoke-Az ad sp show --id $AppId --query id -o tsv
if ($r.Kind -eq 'notfound') {
    $r = Invoke-Az ad sp create --id $AppId --query id -o tsv
    if ($r.Kind -ne 'ok') {
        Stop-Setup ("could not create the service principal of ${AppId}: $(Get-FirstLine $r.Err) (it needs " +
            "Application Administrator, Cloud Application Administrator or the app's owner)")
    }
    Write-Host "  service principal: created ($($r.Out))"
}
elseif ($r.Kind -eq 'ok') { Write-Host "  service principal: found ($($r.Out))" }
else { Stop-Setup "could not tell whether $AppId has a service principal, so nothing was created: $(Get-FirstLine $r.Err)" }
$sp = $r.Out

# 3. the certificate
if ($Cert -and $inHomeTenant) {
    $thumb = ''
    try {
        $x509 = New-Object System.Security.Cryptography.X509Certificates.X509Certificate2 -ArgumentList (
            (Resolve-Path -LiteralPath $Cert).Path)
        $thumb = $x509.Thumbprint.ToUpperInvariant()
    }
    catch { $thumb = '' }
    $r = Invoke-Az ad app credential list --id $AppId --cert --query '[].customKeyIdentifier' -o tsv
    if ($r.Kind -ne 'ok') { Stop-Setup "could not list the registration's certificates: $(Get-FirstLine $r.Err)" }
    $known = @(Get-Lines $r.Out | ForEach-Object { $_.ToUpperInvariant() })
    if ($thumb -and ($known -contains $thumb)) {
        Write-Host "  certificate: uploaded already (thumbprint $thumb)"
    }
    else {
        $r = Invoke-Az ad app credential reset --id $AppId --cert "@$Cert" --append -o none
        if ($r.Kind -eq 'ok') {
            Write-Host "  certificate: uploaded ($Cert, appended: the registration's other keys stay valid)"
        }
        else {
            Write-Host "  certificate: NOT uploaded: $(Get-FirstLine $r.Err)"
            $script:left += "upload $Cert to the registration (owner or Application Administrator): az ad app credential reset --id $AppId --cert @$Cert --append"
        }
    }
}
elseif ($Cert) {
    $script:left += "upload $Cert to the registration in its home tenant: az ad app credential reset --id $AppId --cert @$Cert --append"
}

# 4. the API permissions, granted by appRoleAssignments
function Grant-AppRole([string]$Api, [string]$Value, [string]$ApiName) {
    $r = Invoke-Az ad sp show --id $Api --query id -o tsv
    if ($r.Kind -ne 'ok') { Stop-Setup "could not read ${ApiName}'s service principal in this tenant: $(Get-FirstLine $r.Err)" }
    $resource = $r.Out
    $r = Invoke-Az ad sp show --id $Api --query "appRoles[?value=='$Value'].id" -o tsv
    $role = $r.Out
    if ($r.Kind -ne 'ok' -or -not $role) { Stop-Setup "$ApiName has no application permission ${Value}: $(Get-FirstLine $r.Err)" }
    if ($inHomeTenant) {
        $r = Invoke-Az ad app permission list --id $AppId --query "[?resourceAppId=='$Api'].resourceAccess[].id" -o tsv
        if ($r.Kind -eq 'ok' -and -not (@(Get-Lines $r.Out) -contains $role)) {
            $r = Invoke-Az ad app permission add --id $AppId --api $Api --api-permissions "$role=Role"
            if ($r.Kind -eq 'ok') { Write-Host "  ${Value}: requested on the registration" }
        }
    }
    $url = "https://graph.microsoft.com/v1.0/servicePrincipals/$sp/appRoleAssignments"
    $r = Invoke-Az rest --method get --url $url --query "value[?appRoleId=='$role'].resourceId" -o tsv
    if ($r.Kind -ne 'ok') { Stop-Setup "could not read the app's granted permissions: $(Get-FirstLine $r.Err)" }
    if (@(Get-Lines $r.Out) -contains $resource) {
        Write-Host "  ${Value}: granted already"
        return
    }
    $body = [System.IO.Path]::GetTempFileName()
    try {
        [System.IO.File]::WriteAllText($body,
            "{`"principalId`": `"$sp`", `"resourceId`": `"$resource`", `"appRoleId`": `"$role`"}")
        $r = Invoke-Az rest --method post --url $url --body "@$body" -o none
    }
    finally {
        Remove-Item -LiteralPath $body -Force -ErrorAction SilentlyContinue
    }
    if ($r.Kind -eq 'ok') { Write-Host "  ${Value}: granted (the app's token carries it within minutes)" }
    elseif ($r.Kind -eq 'forbidden') {
        Write-Host "  ${Value}: NOT granted: your account may not grant application permissions ($(Get-FirstLine $r.Err))"
        $script:left += "admin consent for $ApiName ${Value}: a Privileged Role Administrator (or Global Administrator) opens $consentUrl and accepts, or runs this script"
    }
    else { Stop-Setup "granting $Value failed: $(Get-FirstLine $r.Err)" }
}
if (Test-Wants 'graph') { Grant-AppRole $GraphApi 'AuditLogsQuery.Read.All' 'Microsoft Graph' }
if (Test-Wants 'exchange') { Grant-AppRole $ExchangeApi 'Exchange.ManageAsApp' 'Office 365 Exchange Online' }
if (Test-Wants 'feed') { Grant-AppRole $ManagementApi 'ActivityFeed.Read' 'Office 365 Management APIs' }

# 5. the Exchange role
if (Test-Wants 'exchange') {
    Write-Host '  Exchange role (not made by this script): in Exchange Online PowerShell (Connect-ExchangeOnline), as an Exchange'
    Write-Host '  administrator, register the service principal and give it View-Only Audit Logs:'
    Write-Host "    New-ServicePrincipal -AppId $AppId -ObjectId $sp -DisplayName ual-collector"
    Write-Host "    New-ManagementRoleAssignment -App $sp -Role `"View-Only Audit Logs`""
    Write-Host "  or give the service principal $sp the Entra role Compliance Administrator (Entra admin center, Roles)."
}

if ($script:left.Count -eq 0) {
    if (Test-Wants 'exchange') { Write-Host 'Then the Exchange role above, by an Exchange administrator.' }
    Write-Host "Done. Check it with doctor (docs/doctor.md): .../api/doctor?tenantId=$tenant&source=$Source"
    exit 0
}
Write-Host 'Left to do:'
foreach ($item in $script:left) { Write-Host "  - $item" }
exit 1
