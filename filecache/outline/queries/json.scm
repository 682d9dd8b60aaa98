; JSON: the keys of the top-level object.

(document
  (object
    (pair
      key: (string (string_content) @name)
      value: [(object) (array)] @body) @definition.key))

(document
  (object
    (pair
      key: (string (string_content) @name)) @definition.key))
