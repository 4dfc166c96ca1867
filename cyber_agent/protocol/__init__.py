"""The recursive task protocol's own package (see docs/recursive-protocol.md)."""
