"""Reading code safely: bytes from a repository nobody vouched for, decoding, notebooks' JSON, the text pre-filter."""
