; Bash definitions: functions, and UPPER_CASE globals at the top level.

(function_definition
  name: (word) @name
  body: (_) @body) @definition.function

(program
  (variable_assignment
    name: (variable_name) @name) @definition.variable
  (#match? @name "^[A-Z][A-Z0-9_]*$"))

(program
  (declaration_command
    (variable_assignment
      name: (variable_name) @name)) @definition.variable
  (#match? @name "^[A-Z][A-Z0-9_]*$"))
