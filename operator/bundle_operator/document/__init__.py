"""The bundle document format (schema_version 0.1.0): models, parsing, references, checks."""
