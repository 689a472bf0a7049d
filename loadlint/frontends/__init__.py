"""Entry points: the command line, the flake8 plugin and the language server.  Thin: they parse what the user said and hand it to the API or the runner."""
