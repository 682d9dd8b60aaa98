; C definitions (C++ inherits these). Declarators nest: f, *f, **f, &f.

(function_definition
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (pointer_declarator declarator: (pointer_declarator
      declarator: (function_declarator declarator: (_) @name)))
  ]
  body: (compound_statement) @body) @definition.function

; Prototypes at file level.
(translation_unit
  (declaration
    declarator: [
      (function_declarator declarator: (identifier) @name)
      (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
    ]) @declaration.function)

; typedef struct x {...} name; before the bare struct pattern, which shares its body.
(type_definition
  type: (struct_specifier body: (field_declaration_list) @body)
  declarator: (type_identifier) @name) @definition.struct

(type_definition
  type: (union_specifier body: (field_declaration_list) @body)
  declarator: (type_identifier) @name) @definition.union

(type_definition
  type: (enum_specifier body: (enumerator_list) @body)
  declarator: (type_identifier) @name) @definition.enum

(struct_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @definition.struct

(union_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @definition.union

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list) @body) @definition.enum

(type_definition
  declarator: [
    (type_identifier) @name
    (pointer_declarator declarator: (type_identifier) @name)
    (function_declarator
      declarator: (parenthesized_declarator (pointer_declarator declarator: (type_identifier) @name)))
  ]) @definition.type

(preproc_def
  name: (identifier) @name) @definition.macro

(preproc_function_def
  name: (identifier) @name) @definition.macro
