Attribute VB_Name = "Ledger"
Option Explicit

Public Type Entry
    Amount As Currency
    Memo As String
End Type

Private Enum Kind
    Debit = 1
    Credit = 2
End Enum

Private entries() As Entry
Private count As Long

Public Sub AddEntry(ByVal amount As Currency, ByVal memo As String)
    ReDim Preserve entries(count)
    entries(count).Amount = amount
    entries(count).Memo = memo
    count = count + 1
End Sub

Public Function Balance() As Currency
    Dim i As Long
    Dim total As Currency
    For i = 0 To count - 1
        total = total + entries(i).Amount
    Next i
    Balance = total
End Function

Private Function Classify(ByVal amount As Currency) As Kind
If amount < 0 Then
    Classify = Debit
ElseIf amount > 0 Then
    Classify = Credit
Else
    Classify = Credit
End If
End Function

Public Property Get EntryCount() As Long
    EntryCount = count
End Property

Friend Sub Report()
Dim i As Long
Select Case count
Case 0
    Debug.Print "empty ledger"
Case Else
    Debug.Print count & " entries"
End Select
Do While i < count
    Debug.Print entries(i).Memo, Classify(entries(i).Amount)
    i = i + 1
Loop
While False
Wend
With entries(0)
    Debug.Print .Memo
End With
End Sub
