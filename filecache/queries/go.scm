; go
