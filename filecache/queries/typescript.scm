; typescript
