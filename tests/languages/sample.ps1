# Rotates log files older than a given number of days.
param (
    [string]$Path = "C:\Logs",
    [int]$Days = 7
)

function Get-OldLogs {
    param ([string]$Folder, [int]$Age)
    $limit = (Get-Date).AddDays(-$Age)
    Get-ChildItem -Path $Folder -Filter *.log | Where-Object { $_.LastWriteTime -lt $limit }
}

function Compress-Log {
    param ([System.IO.FileInfo]$File)
    $archive = "$($File.FullName).zip"
try {
    Compress-Archive -Path $File.FullName -DestinationPath $archive -Force
    Remove-Item $File.FullName
}
catch {
    Write-Warning "could not compress $($File.Name): $_"
}
finally {
    Write-Verbose "done with $($File.Name)"
}
}

class Summary {
    [int]$Compressed = 0
    [int]$Failed = 0
}

$summary = [Summary]::new()
$old = Get-OldLogs -Folder $Path -Age $Days
if ($old.Count -eq 0) {
    Write-Output "nothing to rotate"
}
foreach ($file in $old) {
    Compress-Log -File $file
    $summary.Compressed++
}
for ($i = 0; $i -lt 3; $i++) {
    Write-Verbose "pass $i"
}
while ($false) { }
switch ($summary.Compressed) {
    0 { Write-Output "none" }
    default { Write-Output "$($summary.Compressed) compressed" }
}
