; rust
