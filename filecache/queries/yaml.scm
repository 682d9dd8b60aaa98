; yaml
