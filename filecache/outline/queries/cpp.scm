; inherits: c
; C++ additions. `template <...>` is added by the code (template_declaration wraps).

; A constructor's member initialisers end its signature.
(function_definition
  declarator: (function_declarator declarator: (_) @name)
  (field_initializer_list) @body) @definition.function

(function_definition
  declarator: [
    (reference_declarator (function_declarator declarator: (_) @name))
    (pointer_declarator declarator: (reference_declarator
      (function_declarator declarator: (_) @name)))
  ]
  body: (compound_statement) @body) @definition.function

(function_definition
  declarator: (function_declarator declarator: (_) @name)
  body: [(default_method_clause) (delete_method_clause)]) @declaration.function

(class_specifier
  name: (_) @name
  body: (field_declaration_list) @body) @definition.class

(namespace_definition
  name: (_) @name
  body: (declaration_list) @body) @definition.namespace

; Member function declarations inside a class body.
(field_declaration_list
  (field_declaration
    declarator: [
      (function_declarator declarator: (_) @name)
      (pointer_declarator declarator: (function_declarator declarator: (_) @name))
      (reference_declarator (function_declarator declarator: (_) @name))
    ]) @declaration.method)

(field_declaration_list
  (declaration
    declarator: (function_declarator declarator: (_) @name)) @declaration.method)

; Prototypes inside a namespace.
(declaration_list
  (declaration
    declarator: [
      (function_declarator declarator: (_) @name)
      (pointer_declarator declarator: (function_declarator declarator: (_) @name))
      (reference_declarator (function_declarator declarator: (_) @name))
    ]) @declaration.function)

(alias_declaration
  name: (type_identifier) @name) @definition.type

(concept_definition
  name: (identifier) @name) @definition.concept

; const/constexpr values at namespace or file level.
(translation_unit
  (declaration
    (type_qualifier)
    declarator: (init_declarator declarator: (identifier) @name)) @definition.constant)

(declaration_list
  (declaration
    (type_qualifier)
    declarator: (init_declarator declarator: (identifier) @name)) @definition.constant)
