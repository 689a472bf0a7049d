"""Which files and which settings: configuration, discovery, ignore patterns and the cache."""
