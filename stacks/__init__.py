"""One stack per deployment unit; stacks compose constructs and add grants, outputs, tags."""
