"""One stack per deployment unit; stacks compose constructs and add grants and outputs.

Tags are applied once, on the app (stacks/composition.py).
"""
