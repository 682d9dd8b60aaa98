; PHP definitions. Attributes and modifiers are part of each node.

(namespace_definition
  name: (_) @name
  body: (compound_statement) @body) @definition.namespace

(class_declaration
  name: (name) @name
  body: (declaration_list) @body) @definition.class

(interface_declaration
  name: (name) @name
  body: (declaration_list) @body) @definition.interface

(trait_declaration
  name: (name) @name
  body: (declaration_list) @body) @definition.trait

(enum_declaration
  name: (name) @name
  body: (enum_declaration_list) @body) @definition.enum

(function_definition
  name: (name) @name
  body: (compound_statement) @body) @definition.function

(method_declaration
  name: (name) @name
  body: (compound_statement) @body) @definition.method

(method_declaration
  name: (name) @name) @declaration.method

(const_declaration
  (const_element (name) @name)) @definition.constant
