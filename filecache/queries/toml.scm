; toml
