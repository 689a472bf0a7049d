"""One file to one result: the pipeline (path, bytes or notebook in), the rule engine, fixes and what withholds them."""
