"""Per-file facts: what one module says about its loaders, gathered in one
traversal by small providers that share a scope and loop cursor.

``collect`` (in ``loadlint.facts.collect``) runs them; each provider's facts
are plain typed data that rules read through ``loadlint.rules.base.Context``.
"""
