; Java definitions. Annotations and modifiers are part of each node.

(class_declaration
  name: (identifier) @name
  body: (class_body) @body) @definition.class

(interface_declaration
  name: (identifier) @name
  body: (interface_body) @body) @definition.interface

(enum_declaration
  name: (identifier) @name
  body: (enum_body) @body) @definition.enum

(record_declaration
  name: (identifier) @name
  body: (class_body) @body) @definition.record

(annotation_type_declaration
  name: (identifier) @name
  body: (annotation_type_body) @body) @definition.interface

(method_declaration
  name: (identifier) @name
  body: (block) @body) @definition.method

(method_declaration
  name: (identifier) @name) @declaration.method

(constructor_declaration
  name: (identifier) @name
  body: (constructor_body) @body) @definition.constructor

(compact_constructor_declaration
  name: (identifier) @name
  body: (block) @body) @definition.constructor

; Constants: static final UPPER_CASE fields
(field_declaration
  declarator: (variable_declarator
    name: (identifier) @name)
  (#match? @name "^[A-Z][A-Z0-9_]*$")) @definition.constant
