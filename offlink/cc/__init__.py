"""`offlink cc`: the compile of one CU into a fat object, and the cache of whole fat objects."""
