; tsx
