"""loadlint: a static advisor for PyTorch input pipelines."""

__version__ = "0.1.0"

#: Where each rule's page (rules/LLnnn.md) is published.
DOCS_URL = "https://github.com/loadlint/loadlint/blob/main/rules"
