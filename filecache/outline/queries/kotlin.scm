; Kotlin definitions (the grammar has no field names, so children are matched by type).

(class_declaration
  "interface"
  (type_identifier) @name
  (class_body)? @body) @definition.interface

(class_declaration
  "enum"
  (type_identifier) @name
  (enum_class_body) @body) @definition.enum

(class_declaration
  (type_identifier) @name
  (class_body)? @body) @definition.class

(object_declaration
  (type_identifier) @name
  (class_body)? @body) @definition.object

(function_declaration
  (simple_identifier) @name
  (function_body) @body) @definition.function

(function_declaration
  (simple_identifier) @name) @declaration.function

(type_alias
  (type_identifier) @name) @definition.type

; const val / top-level val in UPPER_CASE
(source_file
  (property_declaration
    (variable_declaration (simple_identifier) @name)) @definition.constant
  (#match? @name "^[A-Z][A-Z0-9_]*$"))
