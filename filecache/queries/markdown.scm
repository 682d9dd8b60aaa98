; markdown
