; inherits: javascript
; TypeScript additions. The JavaScript patterns above use wildcard names, so they apply.

(abstract_class_declaration
  name: (_) @name
  body: (class_body) @body) @definition.class

(interface_declaration
  name: (_) @name
  body: (_) @body) @definition.interface

(enum_declaration
  name: (_) @name
  body: (enum_body) @body) @definition.enum

(type_alias_declaration
  name: (_) @name) @definition.type

(internal_module
  name: (_) @name
  body: (statement_block) @body) @definition.namespace

(module
  name: (_) @name
  body: (statement_block) @body) @definition.module

(method_signature
  name: (_) @name) @declaration.method

(abstract_method_signature
  name: (_) @name) @declaration.method

(function_signature
  name: (_) @name) @declaration.function

; Exported constants inside a namespace: export const LowStock = '...'
(internal_module
  body: (statement_block
    (export_statement
      (lexical_declaration
        (variable_declarator
          name: (identifier) @name)) @definition.constant)))
