"""Everything that touches libcst directly: parsing, slicing, the walker, code generation and their speed-ups."""
