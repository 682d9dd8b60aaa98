; JavaScript (and JSX) definitions. `export` is added by the code (export_statement wraps).

(class_declaration
  name: (_) @name
  body: (class_body) @body) @definition.class

(class
  name: (_) @name
  body: (class_body) @body) @definition.class

(function_declaration
  name: (_) @name
  body: (statement_block) @body) @definition.function

(generator_function_declaration
  name: (_) @name
  body: (statement_block) @body) @definition.function

(method_definition
  name: (_) @name
  body: (statement_block) @body) @definition.method

; const f = () => {}, const g = function () {}, const C = class {}
(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
      (generator_function body: (_) @body)
      (class body: (_) @body)
    ])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
      (generator_function body: (_) @body)
    ])) @definition.function

; obj.method = function () {} and Foo.prototype.bar = () => {}
(expression_statement
  (assignment_expression
    left: (member_expression
      object: (_) @scope
      property: (property_identifier) @name)
    right: [
      (arrow_function body: (_) @body)
      (function_expression body: (_) @body)
    ])) @definition.function

; Top-level constants: const MAX_SIZE = 10
(program
  (lexical_declaration
    (variable_declarator
      name: (identifier) @name)) @definition.constant
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

(program
  (export_statement
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name)) @definition.constant)
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))
