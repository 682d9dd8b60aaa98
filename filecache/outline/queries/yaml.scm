; YAML: the keys of each document's top-level mapping.

(document
  (block_node
    (block_mapping
      (block_mapping_pair
        key: (_) @name
        value: (block_node) @body) @definition.key)))

(document
  (block_node
    (block_mapping
      (block_mapping_pair
        key: (_) @name) @definition.key)))
