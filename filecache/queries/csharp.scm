; csharp
