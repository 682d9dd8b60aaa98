"""Shell commands: parsing, the reads a bash command makes, and the edits it performs."""
