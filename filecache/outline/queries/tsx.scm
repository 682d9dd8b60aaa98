; inherits: typescript
; TSX: the TypeScript patterns (and through them the JavaScript ones); JSX adds no definitions.
