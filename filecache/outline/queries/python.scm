; Python definitions. Decorators are added by the code (decorated_definition is a wrapper).

(class_definition
  name: (identifier) @name
  body: (block) @body) @definition.class

(function_definition
  name: (identifier) @name
  body: (block) @body) @definition.function

; Module-level constants: UPPER_CASE = ...
(module
  (expression_statement
    (assignment
      left: (identifier) @name) @definition.constant)
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

(module
  (assignment
    left: (identifier) @name) @definition.constant
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

; PEP 695 type aliases: type Vector = list[float]
(type_alias_statement
  left: (type (identifier) @name)) @definition.type
