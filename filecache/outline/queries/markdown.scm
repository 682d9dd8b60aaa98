; Markdown: one definition per section, named by its heading; sections nest by level.

(section
  (atx_heading
    heading_content: (_) @name)) @definition.heading

; A setext heading (underlined with === or ---) that does not open a section of its own.
(setext_heading
  heading_content: (_) @name) @definition.heading
