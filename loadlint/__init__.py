"""loadlint: a static advisor for PyTorch input pipelines."""

__version__ = "0.1.0"
