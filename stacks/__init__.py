"""One stack per deployment unit; stacks compose constructs, pass what one needs from another, and
add outputs. Resources, grants and acknowledgements sit in the constructs (tests/unit/architecture/test_stacks_wire.py).

Tags are applied once, on the app (stacks/composition.py).
"""
