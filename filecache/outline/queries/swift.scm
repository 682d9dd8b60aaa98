; Swift definitions. class_declaration covers class, struct, enum, extension and actor.

(class_declaration
  declaration_kind: "struct"
  name: (type_identifier) @name
  body: (_) @body) @definition.struct

(class_declaration
  declaration_kind: "enum"
  name: (type_identifier) @name
  body: (_) @body) @definition.enum

(class_declaration
  declaration_kind: "actor"
  name: (type_identifier) @name
  body: (_) @body) @definition.actor

(class_declaration
  declaration_kind: "extension"
  name: (user_type (type_identifier) @name)
  body: (_) @body) @definition.extension

(class_declaration
  name: (type_identifier) @name
  body: (_) @body) @definition.class

(protocol_declaration
  name: (type_identifier) @name
  body: (protocol_body) @body) @definition.protocol

(protocol_function_declaration
  name: (simple_identifier) @name) @declaration.method

(function_declaration
  name: (simple_identifier) @name
  body: (function_body) @body) @definition.function

(init_declaration
  name: "init" @name
  body: (function_body) @body) @definition.method

(deinit_declaration
  "deinit" @name
  body: (function_body) @body) @definition.method

(subscript_declaration
  "subscript" @name) @definition.method

; Computed properties: var total: Int { ... }
(property_declaration
  name: (pattern bound_identifier: (simple_identifier) @name)
  computed_value: (computed_property) @body) @definition.property

(typealias_declaration
  name: (type_identifier) @name) @definition.type

; Top-level let constants
(source_file
  (property_declaration
    (value_binding_pattern mutability: "let")
    name: (pattern bound_identifier: (simple_identifier) @name)) @definition.constant)
