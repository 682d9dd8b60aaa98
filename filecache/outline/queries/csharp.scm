; C# definitions. Attributes and modifiers are part of each node.

(namespace_declaration
  name: (_) @name
  body: (declaration_list) @body) @definition.namespace

(file_scoped_namespace_declaration
  name: (_) @name) @definition.namespace

(class_declaration
  name: (identifier) @name
  body: (declaration_list) @body) @definition.class

(struct_declaration
  name: (identifier) @name
  body: (declaration_list) @body) @definition.struct

(interface_declaration
  name: (identifier) @name
  body: (declaration_list) @body) @definition.interface

(record_declaration
  name: (identifier) @name
  body: (declaration_list) @body) @definition.record

(record_declaration
  name: (identifier) @name) @definition.record

(enum_declaration
  name: (identifier) @name
  body: (enum_member_declaration_list) @body) @definition.enum

(delegate_declaration
  name: (identifier) @name) @definition.type

(method_declaration
  name: (identifier) @name
  body: (_) @body) @definition.method

(method_declaration
  name: (identifier) @name) @declaration.method

(constructor_declaration
  name: (identifier) @name
  body: (_) @body) @definition.constructor

(destructor_declaration
  name: (identifier) @name
  body: (_) @body) @definition.method

(operator_declaration
  operator: _ @name
  body: (_) @body) @definition.method

; Properties with code: public decimal Total => ...; or get { ... } bodies
(property_declaration
  name: (identifier) @name
  value: (arrow_expression_clause) @body) @definition.property

(property_declaration
  name: (identifier) @name
  accessors: (accessor_list (accessor_declaration body: (_))) @body) @definition.property
