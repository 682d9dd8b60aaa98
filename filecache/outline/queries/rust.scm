; Rust definitions. Leading #[attributes] are added by the code.

(struct_item
  name: (type_identifier) @name
  body: (_)? @body) @definition.struct

(union_item
  name: (type_identifier) @name
  body: (_) @body) @definition.union

(enum_item
  name: (type_identifier) @name
  body: (enum_variant_list) @body) @definition.enum

(trait_item
  name: (type_identifier) @name
  body: (declaration_list) @body) @definition.trait

; impl Type / impl Trait for Type: named after the type, so methods read Type.method
(impl_item
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
  ]
  body: (declaration_list) @body) @definition.impl

(impl_item
  type: (_) @name
  body: (declaration_list) @body) @definition.impl

(function_item
  name: (identifier) @name
  body: (block) @body) @definition.function

(function_signature_item
  name: (identifier) @name) @declaration.function

(mod_item
  name: (identifier) @name
  body: (declaration_list) @body) @definition.module

(macro_definition
  name: (identifier) @name) @definition.macro

(type_item
  name: (type_identifier) @name) @definition.type

(associated_type
  name: (type_identifier) @name) @declaration.type

(const_item
  name: (identifier) @name) @definition.constant

(static_item
  name: (identifier) @name) @definition.static
