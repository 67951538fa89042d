"""The cache as a library: entries on disk (store), their keys (keys, native), their JSON."""
