; TOML: top-level keys, [tables] and [[arrays of tables]].

(document
  (pair
    [(bare_key) (quoted_key) (dotted_key)] @name) @definition.key)

(table
  [(bare_key) (quoted_key) (dotted_key)] @name) @definition.table

(table_array_element
  [(bare_key) (quoted_key) (dotted_key)] @name) @definition.table
