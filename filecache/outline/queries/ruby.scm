; Ruby definitions.

(module
  name: (_) @name
  body: (_)? @body) @definition.module

(class
  name: (_) @name
  body: (_)? @body) @definition.class

(method
  name: (_) @name
  body: (_)? @body) @definition.method

; def self.build / def obj.method
(singleton_method
  name: (_) @name
  body: (_)? @body) @definition.method

; VERSION = "1.0" directly in a class, module or the program
(assignment
  left: (constant) @name) @definition.constant
